"""Where the report reads and writes: URIs (``file://``, ``s3a://``, ``gs://``, ``abfss://``; a plain path means a
local file), reached two ways.

- Tables (the input's events and acks, the report's Parquet) go through Spark, so through Hadoop's filesystems:
  the connector of each scheme is on Spark's class path (``inturn_reports.jars``), configured by Hadoop's own
  settings (``fs.s3a.*``, ``fs.gs.*``...) and, for an S3-compatible server or another GCS endpoint, by
  ``hadoop_conf``.
- The few small objects that are no table (each night's manifest, the page, summary.csv) go through
  ``pyarrow.fs`` (``ObjectStore``): public API of a package the report already needs, with S3, GCS and Azure
  (ADLS Gen2) filesystems of its own. Both read the same credentials: the AWS SDKs' environment
  (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, or a web identity), Google's application default
  credentials, Azure's default credential chain.

An object written through ``ObjectStore.write`` appears whole or not at all: on object stores an upload becomes
visible only when it completes; on a local disk it is written under a hidden name and renamed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from inturn.errors import ConfigError

#: The URI schemes the report reads and writes; the last three need their Hadoop connector.
SCHEMES = ("file", "s3a", "gs", "abfss")
_OTHER_NAMES = {"s3": "s3a", "s3n": "s3a", "gcs": "gs", "abfs": "abfss", "wasb": "abfss", "wasbs": "abfss"}


def to_uri(location: str | os.PathLike[str]) -> str:
    """``location`` as the URI the report uses: a plain path becomes an absolute ``file://`` URI; a URI of another
    scheme than ``SCHEMES`` is a ConfigError naming the one to use."""
    text = os.fspath(location)
    parts = urlsplit(text)
    if not parts.scheme:
        return Path(text).expanduser().resolve().as_uri()
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"{text}: a file:// URI names no host (file:///absolute/path)")
        return Path(unquote(parts.path)).resolve().as_uri()
    if scheme not in SCHEMES:
        hint = f" (use {_OTHER_NAMES[scheme]}://)" if scheme in _OTHER_NAMES else ""
        raise ConfigError(f"{text}: the report reads and writes {', '.join(s + '://' for s in SCHEMES)}{hint}")
    if not parts.netloc:
        raise ConfigError(f"{text}: no bucket or container after {scheme}://")
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def scheme(uri: str) -> str:
    """The scheme of a URI ``to_uri`` made."""
    return uri.split(":", 1)[0]


def join(uri: str, *parts: str) -> str:
    """``uri`` with ``parts`` appended, ``/`` between."""
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])


def local_path(uri: str) -> Path | None:
    """The local path of a ``file://`` URI; None for object storage."""
    return Path(unquote(urlsplit(uri).path)) if scheme(uri) == "file" else None


@dataclasses.dataclass(frozen=True)
class S3Options:
    """How to reach an S3-compatible server other than AWS's own (MinIO, Ceph, a cloud's S3 API)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False


@dataclasses.dataclass(frozen=True)
class GcsOptions:
    """How to reach a Google Cloud Storage endpoint other than Google's own (a private endpoint, a local server)."""

    endpoint: str | None = None  # its root URL, e.g. http://127.0.0.1:4443
    anonymous: bool = False  # send no credentials (a local server that checks none)


def hadoop_conf(s3: S3Options, gcs: GcsOptions = GcsOptions()) -> dict[str, str]:
    """Hadoop settings (``fs.s3a.*``, ``fs.gs.*``) for ``s3`` and ``gcs``; set on a session at run time, Spark hands
    them to the filesystems of its reads and writes (empty for AWS and Google themselves, where Hadoop's defaults
    hold)."""
    conf: dict[str, str] = {}
    if gcs.endpoint:
        conf["fs.gs.storage.root.url"] = gcs.endpoint
    if gcs.anonymous:
        conf["fs.gs.auth.type"] = "UNAUTHENTICATED"
    if s3.endpoint:
        conf["fs.s3a.endpoint"] = s3.endpoint
        conf["fs.s3a.connection.ssl.enabled"] = str(not s3.endpoint.startswith("http://")).lower()
    if s3.region:
        conf["fs.s3a.endpoint.region"] = s3.region
    if s3.path_style:
        conf["fs.s3a.path.style.access"] = "true"
    return conf


class ObjectStore:
    """Small objects under a root URI, through ``pyarrow.fs``: the manifests, the page, summary.csv."""

    def __init__(self, root: str, s3: S3Options = S3Options(), gcs: GcsOptions = GcsOptions()) -> None:
        self.root = root
        self._fs, self._base = _filesystem(root, s3, gcs)

    def uri(self, key: str) -> str:
        """The URI of ``key`` (a ``/``-separated path under the root)."""
        return join(self.root, key)

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The ``pyarrow.fs`` filesystem the root is on."""
        return self._fs

    def path(self, key: str) -> str:
        """``key`` as a path of ``filesystem``."""
        return "/".join([self._base.rstrip("/"), key.strip("/")])

    def write(self, key: str, data: bytes) -> str:
        """``data`` as the object ``key``, replacing it whole (see the module's doc); its URI."""
        path = self.path(key)
        parent = path.rsplit("/", 1)[0]
        if isinstance(self._fs, pafs.LocalFileSystem):
            self._fs.create_dir(parent, recursive=True)
            staged = f"{parent}/.{path.rsplit('/', 1)[1]}.{uuid.uuid4().hex}.tmp"
            with self._fs.open_output_stream(staged) as out:
                out.write(data)
            self._fs.move(staged, path)  # rename(2): atomic on one filesystem
        else:
            with self._fs.open_output_stream(path) as out:
                out.write(data)
        return self.uri(key)

    def read(self, key: str) -> bytes | None:
        """The object ``key``, or None where there is none."""
        try:
            with self._fs.open_input_stream(self.path(key)) as source:
                data: bytes = source.read()
                return data
        except FileNotFoundError:
            return None

    def keys(self, prefix: str) -> list[str]:
        """The keys of the objects under ``prefix`` (a folder), sorted; none where it does not exist."""
        selector = pafs.FileSelector(self.path(prefix), recursive=True, allow_not_found=True)
        base = self._base.rstrip("/") + "/"
        infos = self._fs.get_file_info(selector)
        return sorted(i.path.removeprefix(base) for i in infos if i.type == pafs.FileType.File)

    def delete(self, key: str) -> None:
        """The object ``key``; nothing where there is none."""
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(self.path(key))

    def delete_folder(self, prefix: str) -> None:
        """Every object under ``prefix``; nothing where there is none."""
        path = self.path(prefix)
        if self._fs.get_file_info(path).type != pafs.FileType.NotFound:
            # On GCS the objects go first, then the folder's marker object, which an upload does not create: its
            # absence is no error.
            with contextlib.suppress(FileNotFoundError):
                self._fs.delete_dir(path)


def _filesystem(root: str, s3: S3Options, gcs: GcsOptions) -> tuple[pafs.FileSystem, str]:
    parts = urlsplit(root)
    kind = parts.scheme
    try:
        if kind == "file":
            return pafs.LocalFileSystem(), unquote(parts.path)
        if kind == "s3a":
            fs = pafs.S3FileSystem(
                endpoint_override=s3.endpoint,
                region=s3.region,
                # pyarrow addresses buckets by path unless told otherwise; AWS itself wants virtual hosts.
                force_virtual_addressing=not s3.path_style,
            )
            return fs, f"{parts.netloc}{parts.path}"
        if kind == "gs":
            endpoint = urlsplit(gcs.endpoint) if gcs.endpoint else None
            gcs_fs = pafs.GcsFileSystem(
                anonymous=gcs.anonymous,
                endpoint_override=endpoint.netloc if endpoint else None,
                scheme=endpoint.scheme if endpoint else None,
            )
            return gcs_fs, f"{parts.netloc}{parts.path}"
        if kind == "abfss":  # abfss://<container>@<account>.dfs.core.windows.net/<path>
            container, _, host = parts.netloc.partition("@")
            account = host.split(".", 1)[0]
            if not container or not account:
                raise ConfigError(f"{root}: abfss:// needs <container>@<account>.dfs.core.windows.net")
            return pafs.AzureFileSystem(account_name=account), f"{container}{parts.path}"
    except pa.ArrowException as exc:
        raise ConfigError(f"cannot reach {root}: {exc}") from exc
    raise ConfigError(f"{root}: the report reads and writes {', '.join(s + '://' for s in SCHEMES)}")
