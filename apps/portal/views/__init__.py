"""Server-rendered pages. One module per page family: home and jobs (jobs.py), submission
(submit.py), virtual clusters and the cluster (vcs.py, cluster.py), the user's account
(account.py). Every page reads through the same querysets as the API (`visible_to`,
`readable_by`, `manageable_by`), so a page shows exactly what the API would."""
