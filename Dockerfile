# One image for the API and the worker; the command picks the role.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 WINGSMITH_HOME=/var/lib/wingsmith
COPY pyproject.toml README.md ./
# The locked versions, with their hashes (scripts/lock.sh): the image holds what CI tested.
COPY requirements ./requirements
COPY api ./api
COPY console ./console
COPY gateway ./gateway
COPY contracts ./contracts
COPY workflows ./workflows
COPY activities ./activities
COPY worker ./worker
COPY wingsmith ./wingsmith
COPY sim ./sim
# `--build-arg EXTRAS=perf`: an image that can also run the perf worker (AIConfigurator, ~0.8 GB more).
ARG EXTRAS=""
# The image's build id, which `wingsmith --version` and `/version` name (Worker Versioning's build id too).
ARG BUILD=""
ENV WINGSMITH_BUILD=${BUILD}
# A fixed uid: Kubernetes checks runAsNonRoot only against a numeric user (deploy/kustomize).
RUN pip install --no-cache-dir --require-hashes --no-deps -r "requirements/plane${EXTRAS:+-$EXTRAS}.lock" \
    && pip install --no-cache-dir --no-deps . \
    && useradd --system --uid 10001 --home /var/lib/wingsmith wingsmith \
    && mkdir -p /var/lib/wingsmith && chown wingsmith /var/lib/wingsmith
USER 10001
EXPOSE 8000
CMD ["python", "-m", "api"]
