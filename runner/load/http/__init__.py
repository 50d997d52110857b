"""xferlab's own asyncio HTTP/1.1 client (`client`, `response`), the `xferlab-http` driver."""
