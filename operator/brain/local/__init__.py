"""The local stack: `brainctl up`, the embedded Postgres, the fake upstream and the eval harness."""
