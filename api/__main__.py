"""`python -m api`: serve the API with uvicorn (one process; the API needs only a Temporal client)."""

import uvicorn

from wingsmith.config import get_settings

settings = get_settings()
uvicorn.run("api.main:app", host=settings.api_host, port=settings.api_port, log_level="warning",
            proxy_headers=True)
