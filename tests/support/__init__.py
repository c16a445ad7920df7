"""What several test packages need, in one place: message builders (``messages``), an aiohttp receiver on a free
loopback port found through aiohttp's public API (``receiver``), a topic reader (``topics``), certificates made in
a test (``certs``), a TCP proxy that can blackhole a path (``proxy``), a Pub/Sub push subscription (``pubsub``)
and environment variables set for one test (``env``)."""
