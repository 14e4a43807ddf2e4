"""The training core: what one training step needs, without the loop that runs it.

The trainer's state and the hooks' requests (`state`), the dataset and its collation
(`dataset`), batches staged one step ahead (`staging`), the step itself under Accelerate
(`accelerated`, `compiled`), the stop flag's agreement between ranks (`stop_sync`), the
guard against a non-finite loss (`loss_guard`), the per-sample losses of a micro-batch
(`sample_losses`) and their per-simulation statistics (`loss_per_simulation`), the
figures a log reports (`figures`), and the process group's end at the interpreter's
exit (`process_group`).

The first layer that imports torch. Never imports `hooks`, `checkpoint`, `study` or
`trainer`; what it needs of a running trainer is the `view.TrainerView` protocol.
"""
