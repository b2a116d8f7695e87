# One image for the API and the worker; the command picks the role.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 WINGSMITH_HOME=/var/lib/wingsmith
COPY pyproject.toml README.md ./
COPY api ./api
COPY workflows ./workflows
COPY activities ./activities
COPY worker ./worker
COPY wingsmith ./wingsmith
COPY sim ./sim
RUN pip install --no-cache-dir . && useradd --system --home /var/lib/wingsmith wingsmith \
    && mkdir -p /var/lib/wingsmith && chown wingsmith /var/lib/wingsmith
USER wingsmith
EXPOSE 8000
CMD ["python", "-m", "api"]
