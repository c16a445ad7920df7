"""What the webhook's OpenAPI document says about its bodies and answers.

The handlers read the raw body themselves (the signature covers the exact bytes), so request
bodies are described here as plain JSON Schema rather than parsed through pydantic models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

_STATUS_VALUES = ["sent", "delivered", "read", "failed"]

META_STATUS: dict[str, Any] = {
    "type": "object",
    "required": ["id", "status", "timestamp"],
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Platform message id (wamid)."},
        "status": {"type": "string", "enum": _STATUS_VALUES},
        "timestamp": {
            "type": "string",
            "pattern": r"^[0-9]{1,11}(\.[0-9]{1,6})?$",
            "description": "Unix seconds, optionally with a fractional part.",
        },
        "recipient_id": {"type": "string", "description": "The recipient's WhatsApp id."},
        "biz_opaque_callback_data": {
            "type": "string",
            "maxLength": 512,
            "description": "Routing data inturn attached to the send: names the room and message.",
        },
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"code": {"type": "integer"}, "title": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}

META_BODY: dict[str, Any] = {
    "required": True,
    "description": "Meta's webhook notification (WhatsApp Cloud API). Signed: X-Hub-Signature-256.",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["entry"],
                "properties": {
                    "object": {"type": "string", "example": "whatsapp_business_account"},
                    "entry": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["changes"],
                            "properties": {
                                "id": {"type": "string"},
                                "changes": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["value"],
                                        "properties": {
                                            "field": {"type": "string", "example": "messages"},
                                            "value": {
                                                "type": "object",
                                                "properties": {
                                                    "messaging_product": {"type": "string"},
                                                    "metadata": {
                                                        "type": "object",
                                                        "properties": {"phone_number_id": {"type": "string"}},
                                                    },
                                                    "statuses": {"type": "array", "items": META_STATUS},
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            }
        }
    },
}

GENERIC_BODY: dict[str, Any] = {
    "required": True,
    "description": "Acks of any platform in inturn's own format. Signed: X-Inturn-Signature-256.",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["acks"],
                "properties": {
                    "acks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["room_id", "platform_message_id", "status", "timestamp_ms"],
                            "properties": {
                                "room_id": {"type": "string", "minLength": 1, "maxLength": 256},
                                "message_id": {"type": "string", "minLength": 1, "maxLength": 128},
                                "platform_message_id": {"type": "string", "minLength": 1, "maxLength": 256},
                                "status": {"type": "string", "enum": _STATUS_VALUES},
                                "timestamp_ms": {"type": "integer", "minimum": 0},
                                "recipient": {"type": "string"},
                                "error": {"type": "string"},
                            },
                        },
                    }
                },
            }
        }
    },
}


def signature_header(name: str, secret: str) -> dict[str, Any]:
    """An OpenAPI header parameter for a ``sha256=<hex>`` signature."""
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": f"sha256=<hex HMAC-SHA256 of the raw body with the {secret}>.",
        "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
    }


def signed_callback(header: str, secret: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments that document a platform's callback route (FastAPI's ``add_api_route``/``post``): its
    answers (``POST_RESPONSES``), its signature header made with ``secret``, and its request ``body`` when given."""
    extra: dict[str, Any] = {} if body is None else {"requestBody": body}
    extra["parameters"] = [signature_header(header, secret)]
    return {"response_model": None, "responses": POST_RESPONSES, "openapi_extra": extra}


class Accepted(BaseModel):
    """The 200 answer: what became of the request's statuses (all of it confirmed by Kafka)."""

    published: int = Field(description="Acks written to the acks topic.")
    replayed: int = Field(description="Statuses already published recently (not published again).")
    unknown_room: int = Field(description="Statuses whose room is unknown (on the dead-letter topic).")
    dead_lettered: int = Field(description="Unreadable statuses or bodies put on the dead-letter topic.")
    ignored: int = Field(description="Changes without statuses (e.g. incoming messages).")
    reason: str | None = Field(None, description="Why the whole body was dead-lettered, when it was.")


class Problem(BaseModel):
    """An error answer."""

    detail: str


class Health(BaseModel):
    """``/healthz``'s answer (the shape of every inturn process: ``inturn.probes``)."""

    status: Literal["ok", "failed"]


class Ready(BaseModel):
    """``/readyz``'s answer (the shape of every inturn process: ``inturn.probes``)."""

    ready: bool
    kafka_last_ok_s: float | None = Field(None, description="Seconds since Kafka last answered.")


POST_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": Accepted, "description": "Every ack (and dead letter) of the request is confirmed by Kafka."},
    401: {"model": Problem, "description": "Signature header missing, malformed or wrong."},
    413: {"model": Problem, "description": "Body over the size limit (with or without Content-Length)."},
    503: {"model": Problem, "description": "Kafka did not confirm in time; the platform should retry."},
}
