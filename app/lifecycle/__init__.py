"""Start-up and shut-down of the service's processes: the API's (`api`), a worker's (`worker`), and runs in this process without a server (`local`)."""
