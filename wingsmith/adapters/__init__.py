"""Adapters: the domain's way to the world and back.

The store (Postgres), member clusters (Kubernetes), the Hugging Face Hub, the gateways, AIConfigurator,
the catalog on disk and upstream, the Temporal connection, payload encryption, logs, metrics, tracing
and single sign-on. Adapters may import the domain (wingsmith/domain/); the domain never imports them."""
