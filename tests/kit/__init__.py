"""The test kit: what tests/, e2e/ and hack/ share to stand the real parts up and talk to them.

One module a part, as kopf's `kopf.testing` is one place for its runner: `database` (embedded
Postgres, fresh databases, the offline model), `gateway` (a real LiteLLM gateway process and its
client), `client` (the blocking client the stories drive a gateway with, and the fake provider's
controls), `cluster` (a control plane, kubectl bound to it), `traces` (an OpenTelemetry collector),
`poll` (the one bounded wait), `workers` (which xdist worker owns what), `skip_budget`, and the
shared corpora and references (`secret_corpus`, `lint_corpus`, `lexical_reference`,
`migration_compat`).
"""
