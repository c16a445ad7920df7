"""What several test packages need, in one place: message builders (``messages``), an aiohttp receiver on a free
loopback port found through aiohttp's public API (``receiver``), and a topic reader (``topics``)."""
