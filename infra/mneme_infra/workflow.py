"""The consolidation state machine's definition, built from `mneme.consolidation.stages.STAGE_NAMES`.

Input `{"tenant", "run_id", "targets": [scope ids]}` (StepFunctionsOrchestrator). A Distributed Map over the
targets runs, per scope and in a child execution of its own, batch after batch as
`ConsolidationService._scope` does locally:

    Begin -> <one task per stage, in STAGE_NAMES order> -> Summarize -> MoreEpisodes?
      ^------------------------ full, no errors, fewer than max_batches_per_scope ---'

A stage that still fails after its retries is caught: the catcher appends the error to the batch (as
`Batch.fail` does), `HoldCheckpoint` runs the checkpoint stage on it, which holds because the batch has
errors, and the scope's loop ends, exactly like the local `run_batch`. After the Map, `Finish` folds the
batch summaries into the run record. If the Map itself fails, `RecordRunFailure` marks the run failed
before the execution fails, so no run stays "running".

JSONata, not JSONPath: appending to a list (an error to a batch, a summary to the scope's list) has no
JSONPath intrinsic. Summaries keep only what `finish` reads (counters, errors, whether episodes were
read), and each child folds its scope's summaries into one (SCOPE_SUMMARY), so the Map's output grows
with the run's scopes, which MAX_TARGETS_PER_RUN keeps below the 256 KiB state limit.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from mneme.consolidation.stages import STAGE_NAMES
from mneme.errors import StoreUnavailable, Throttled

# Lambda service errors worth retrying (the Invoke API's own failures, not the function's).
LAMBDA_ERRORS = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
)
# The domain's transient errors: an unhandled exception's errorType is its class name (mneme.errors); and
# the task's Lambda timing out (extract stops calling the reasoner before that: `TASK_MARGIN_SECONDS`).
TRANSIENT_ERRORS = (Throttled.__name__, StoreUnavailable.__name__, "Sandbox.Timedout")

SUMMARY = """{
  "tenant": $b.tenant, "scope_id": $b.scope_id, "run_id": $b.run_id, "started_at": $b.started_at,
  "counters": $b.counters, "errors": $b.errors,
  "episode_ids": $count($b.episode_ids) > 0 ? [$b.episode_ids[0]] : []
}"""
# A batch for a target whose `begin` failed: nothing was read, so the checkpoint holds trivially.
EMPTY_BATCH = """{
  "tenant": $target.tenant, "scope_id": $target.scope_id, "run_id": $target.run_id,
  "started_at": $states.context.State.EnteredTime, "counters": {}, "errors": [], "episode_ids": [], "full": false
}"""
# Task errors carry the Python exception as JSON in Cause: keep its message, else the Cause's start.
MESSAGE = (
    '$states.errorOutput.Error & ": " & ($m := $match($string($states.errorOutput.Cause), '
    r'/"errorMessage"\s*:\s*"([^"]*)"/); '  # (up to an escaped quote: no `\]` in a JSONata regex)
    "$m ? $m.groups[0] : $substring($string($states.errorOutput.Cause), 0, 500))"
)
# The run-level batch `RecordRunFailure` hands to `finish` when the Map itself failed.
RUN_BATCH = """{
  "tenant": $states.input.tenant, "scope_id": "*", "run_id": $states.input.run_id,
  "started_at": $states.context.Execution.StartTime, "counters": {}, "errors": []
}"""
WORKFLOW = "workflow"  # the pseudo-stage a run-level failure is recorded under
FLATTEN = "$reduce($states.result, function($all, $target) { $append($all, $target) }, [])"
# What a child (one scope) returns: its batch summaries folded into one, so the parent's Map output grows
# with the run's scopes, not its batches (`finish` sums the same counters either way). Counters summed per
# stage and name; errors (at most one per scope: a failed batch ends the scope's loop) kept with messages
# cut to MESSAGE_CHARS; the first episode id read, if any.
MESSAGE_CHARS = 200
SCOPE_SUMMARY = """(
  $all := $batches;
  $keysOf := function($objects) { $distinct($reduce($objects, function($acc, $o) { $append($acc, $o ? $keys($o) : []) },
    [])) };
  $counters := $all.counters;
  [{
    "tenant": $target.tenant, "scope_id": $target.scope_id, "run_id": $target.run_id,
    "started_at": $all[0].started_at,
    "counters": $merge([{}, $map($keysOf($counters), function($s) {
      ( $perStage := $map($counters, function($c) { $lookup($c, $s) });
        { $s: $merge([{}, $map($keysOf($perStage), function($k) {
          { $k: $sum($map($perStage, function($p) { $p and $exists($lookup($p, $k)) ? $lookup($p, $k) : 0 })) }
        })]) } )
    })]),
    "errors": $append([], $map($reduce($all, function($acc, $b) { $append($acc, $b.errors) }, []),
      function($e) { $merge([$e, {"message": $substring($string($e.message), 0, MESSAGE_CHARS)}]) })),
    "episode_ids": $count($all[$count(episode_ids) > 0]) > 0 ? [$all[$count(episode_ids) > 0][0].episode_ids[0]] : []
  }]
)""".replace("MESSAGE_CHARS", str(MESSAGE_CHARS))


def jsonata(expression: str) -> str:
    """A JSONata template on one line (no literal below holds two spaces in a row)."""
    return "{% " + " ".join(expression.split()) + " %}"


def with_failure(stage: str, batch: str) -> str:
    """`batch` after `Batch.fail(stage, message)`: the error appended and the stage's `errors` counter
    incremented (`finish` reads a stage's errors only for stages present in `counters`)."""
    return jsonata(
        f"""(
  $b := {batch};
  $counted := $lookup($b.counters, "{stage}");
  $merge([$b, {{
    "errors": $append($b.errors, [{{"stage": "{stage}", "message": {MESSAGE}, "source": "step_functions"}}]),
    "counters": $merge([$b.counters ? $b.counters : {{}}, {{"{stage}": $merge([$counted ? $counted : {{}},
      {{"errors": ($counted.errors ? $counted.errors : 0) + 1}}])}}])
  }}])
)"""
    )


# One batch in a child execution's history: Begin and one task per stage (entered, scheduled, started,
# succeeded, exited), Summarize and MoreEpisodes (entered, exited). Retries add more, hence the margin.
EVENTS_PER_BATCH = 5 * (1 + len(STAGE_NAMES)) + 2 * 2
HISTORY_LIMIT = 25_000
HISTORY_BUDGET = 20_000  # of a child execution's 25,000 events, for the batches of its one scope


def max_batches_within_history() -> int:
    return HISTORY_BUDGET // EVENTS_PER_BATCH


class Workflow:
    """The states, named after the stages; `definition` is the chain to hand to the state machine."""

    def __init__(
        self, scope: Construct, *, stages: lambda_.IFunction, map_concurrency: int, max_batches_per_scope: int
    ) -> None:
        if max_batches_per_scope > max_batches_within_history():
            raise ValueError(
                f"max_batches_per_scope {max_batches_per_scope} would exceed a child execution's event history: "
                f"at most {max_batches_within_history()} ({EVENTS_PER_BATCH} events per batch)"
            )
        self.scope, self.stages = scope, stages
        hold = self._task("HoldCheckpoint", {"stage": STAGE_NAMES[-1], "batch": jsonata("$states.input")})
        summarize = sfn.Pass.jsonata(
            scope, "Summarize", assign={"batches": jsonata(f"($b := $states.input; $append($batches, [{SUMMARY}]))")}
        )
        hold.add_catch(summarize, errors=[sfn.Errors.ALL], outputs=jsonata("$states.input"))
        hold.next(summarize)
        begin = self._task(
            "Begin",
            {"stage": "begin", **{key: jsonata(f"$target.{key}") for key in ("tenant", "run_id", "scope_id")}},
            assign={"iteration": jsonata("$iteration + 1")},
        )
        begin.add_catch(hold, errors=[sfn.Errors.ALL], outputs=with_failure("begin", EMPTY_BATCH))
        chain: sfn.INextable = begin
        for name in STAGE_NAMES:
            task = self._task(f"Stage_{name}", {"stage": name, "batch": jsonata("$states.input")})
            task.add_catch(hold, errors=[sfn.Errors.ALL], outputs=with_failure(name, "$states.input"))
            chain.next(task)
            chain = task
        chain.next(summarize)
        more = jsonata(
            f"$states.input.full = true and $count($states.input.errors) = 0 and $iteration < {max_batches_per_scope}"
        )
        done = sfn.Pass.jsonata(scope, "TargetDone", outputs=jsonata(SCOPE_SUMMARY))
        summarize.next(
            sfn.Choice.jsonata(scope, "MoreEpisodes").when(sfn.Condition.jsonata(more), begin).otherwise(done)
        )
        start = sfn.Pass.jsonata(
            scope, "Target", assign={"target": jsonata("$states.input"), "batches": [], "iteration": 0}
        )
        start.next(begin)

        # Distributed: each target (scope) runs as a child Standard execution with its own event history,
        # so a run's history no longer grows with its batch count (an inline Map met the 25,000-event
        # limit near 500 batches); the parent records a constant handful of Map Run events.
        targets = sfn.DistributedMap.jsonata(
            scope,
            "Targets",
            label="Targets",
            map_execution_type=sfn.StateMachineType.STANDARD,
            items=sfn.ProvideItems.jsonata(jsonata("$states.input.targets")),
            item_selector={
                "tenant": jsonata("$states.input.tenant"),
                "run_id": jsonata("$states.input.run_id"),
                "scope_id": jsonata("$states.context.Map.Item.Value"),
            },
            max_concurrency=map_concurrency,
            outputs={
                "tenant": jsonata("$states.input.tenant"),
                "run_id": jsonata("$states.input.run_id"),
                "batches": jsonata(FLATTEN),
            },
        ).item_processor(start)
        finish = self._task(
            "Finish",
            {"stage": "finish", **{key: jsonata(f"$states.input.{key}") for key in ("tenant", "run_id", "batches")}},
        )
        failed = sfn.Fail.jsonata(
            scope, "ConsolidationFailed", error=jsonata("$runError.Error"), cause=jsonata("$runError.Cause")
        )
        record_failure = self._task(
            "RecordRunFailure",
            {"stage": "finish", "tenant": jsonata("$runBatch.tenant"), "run_id": jsonata("$runBatch.run_id"),
             "batches": jsonata("[$runBatch]")},
        )  # fmt: skip
        record_failure.add_catch(failed, errors=[sfn.Errors.ALL])
        record_failure.next(failed)
        targets.add_catch(
            record_failure,
            errors=[sfn.Errors.ALL],
            assign={"runError": jsonata("$states.errorOutput"), "runBatch": with_failure(WORKFLOW, RUN_BATCH)},
        )
        self.definition = targets.next(finish)

    def _task(self, state: str, payload: dict[str, object], **kwargs: object) -> tasks.LambdaInvoke:
        task = tasks.LambdaInvoke.jsonata(
            self.scope,
            state,
            lambda_function=self.stages,
            payload=sfn.TaskInput.from_object(payload),
            outputs=jsonata("$states.result.Payload"),
            retry_on_service_exceptions=False,  # replaced by the explicit policy below
            **kwargs,  # type: ignore[arg-type]
        )
        task.add_retry(
            errors=list(LAMBDA_ERRORS),
            interval=Duration.seconds(2),
            max_attempts=6,
            backoff_rate=2,
            max_delay=Duration.seconds(60),
            jitter_strategy=sfn.JitterType.FULL,
        )
        task.add_retry(
            errors=list(TRANSIENT_ERRORS),
            interval=Duration.seconds(5),
            max_attempts=4,
            backoff_rate=2,
            max_delay=Duration.minutes(2),
            jitter_strategy=sfn.JitterType.FULL,
        )
        return task
