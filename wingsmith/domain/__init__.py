"""The domain: what Wingsmith knows about models, recipes, GPUs, placement and rendering, as pure code.

Everything under this package is models and rules: no database, Kubernetes, HTTP or Temporal client,
no file read or written, no process started (tests/test_layers.py checks both, by folder). The
contracts and the workflows import the domain and nothing else of wingsmith/, and the worker shares
it with every workflow run instead of re-importing it per sandbox (worker/sandbox.py). Reading and
writing the world is wingsmith/adapters/; the entry points are wingsmith/cli/ and wingsmith/local/."""
