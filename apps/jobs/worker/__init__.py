"""The worker glue: load ORM state, ask the engine, apply decisions through a backend, persist.

- `lease`: one scheduler at a time (a lease row with expiry).
- `backends`: the cluster backend of a Cluster row.
- `launch`: what a placed job's pods look like (PodSpec per task attempt).
- `controller`: one cycle: observe pods, advance job lifecycles, schedule, launch.
"""
