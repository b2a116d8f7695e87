"""What the plane's workflows promise to the processes that talk to them: one module per workflow
with its type name, its input, state, status, the payloads and names of its signals, updates and
queries, and the `ApplicationError` type names it raises. The API, the activities and the workflows
all meet here, so none of them needs to import another's code (tests/test_layers.py keeps it so).
Contracts import only pydantic, `temporalio.common` and the pure domain."""
