"""``proofgym eval``: run a policy on an environment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from proofgym.cli.console import console
from proofgym.cli.numbers import number
from proofgym.core.defaults import DEFAULTS


def eval_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    n: Annotated[Optional[int], typer.Option("-n", "--episodes", min=1,  # noqa: UP045 - typer
                                             help="Episodes to run (default: every task once).")] = None,
    sample: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=1, help="Run this many distinct tasks, drawn with --seed evenly across the tasks' "
                    "groups (RepoRepair: projects); each --repeats times.")] = None,
    policy: Annotated[str, typer.Option(
        help="reference | random | control:NAME | openai:MODEL (with --base-url)")] = "reference",
    seed: Annotated[int, typer.Option(
        help="Seed of the first episode (episode i uses seed+i).")] = DEFAULTS.seed,
    out: Annotated[Optional[Path], typer.Option(help="Run directory to write.")] = None,  # noqa: UP045
    resume: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="Continue the killed or unfinished run in this directory (same settings).")] = None,
    split: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Evaluate one split only: train | dev | heldout.")] = None,
    splits: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="Split manifest (from `proofgym splits freeze`) to take the splits from.")] = None,
    base_url: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="OpenAI-compatible server for openai:MODEL, e.g. http://localhost:8000/v1.")] = None,
    api_key: Annotated[Optional[str], typer.Option(  # noqa: UP045
        envvar="OPENAI_API_KEY", show_envvar=True, help="API key for openai:MODEL.")] = None,
    system_prompt: Annotated[Optional[str], typer.Option(  # noqa: UP045
        help="System prompt for openai:MODEL.")] = None,
    temperature: Annotated[Optional[float], typer.Option(  # noqa: UP045 - typer
        parser=number(0.0), help="Sampling temperature for openai:MODEL, >= 0 (default: the "
                                 "server's).")] = None,
    top_p: Annotated[Optional[float], typer.Option(  # noqa: UP045 - typer
        parser=number(0.0, 1.0, lo_open=True),
        help="Nucleus sampling top_p for openai:MODEL, in (0, 1] (default: the server's).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=1, help="Most tokens per model answer for openai:MODEL (default: the server's).")] = None,
    sampling: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--sampling", metavar="KEY=VALUE",
        help="Any other chat.completions argument for openai:MODEL, VALUE as JSON (else a string), "
             "e.g. --sampling seed=7 (repeatable); recorded in contract.json.")] = None,
    sampling_file: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="JSON (or .toml) object of sampling settings for openai:MODEL; the flags above "
             "override it.")] = None,
    policy_version: Annotated[str, typer.Option(
        help="Version recorded on every trajectory (a checkpoint or training step)."),
    ] = DEFAULTS.policy_version,
    concurrency: Annotated[int, typer.Option(
        "-c", "--concurrency", min=1,
        help="Episodes in flight at once (the async orchestrator).")] = DEFAULTS.concurrency,
    repeats: Annotated[int, typer.Option(
        "-G", "--repeats", min=1, help="Attempts per task, recorded as a group.")] = DEFAULTS.repeats,
    verifier: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="process (out of band, crash-isolated) | ray (grader actors on the cluster) | inline "
             "(in the episode's slot). Default: ray with --backend ray, else process.")] = None,
    grader_processes: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=1, help="Grader worker processes (grader actors with --verifier ray) [default: the CPU "
                    "count].")] = None,
    grader_jobs: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=1, help="Grading jobs in flight at once [default: the CPU count; raise it for graders "
                    "that mostly wait, e.g. an LLM judge].")] = None,
    grader_timeout: Annotated[float, typer.Option(
        parser=number(0.0, lo_open=True), help="Seconds a grading job may take."),
    ] = DEFAULTS.grader_timeout_s,
    max_error_rate: Annotated[float, typer.Option(
        parser=number(0.0, 1.0), help="Largest share of unscored episodes (grader or episode errors) a "
                               "run may have; above it the command exits with status 3."),
    ] = DEFAULTS.max_error_rate,
    client_timeout: Annotated[float, typer.Option(
        parser=number(0.0, lo_open=True),
        help="Seconds one model call (openai:MODEL) may take before it is retried."),
    ] = DEFAULTS.client_timeout_s,
    env_arg: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--env-arg", metavar="KEY=VALUE",
        help="A keyword argument for the env's factory, typed by its signature (repeatable); "
             "recorded in the run's contract.json.")] = None,
    backend: Annotated[str, typer.Option(
        help="Where env slots run: local (this process) | ray (Ray actors on a cluster).")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Ray cluster to use with --backend ray (default: $RAY_ADDRESS, a local `ray start` "
             "cluster, else a new local one).")] = None,
    cpus_per_slot: Annotated[float, typer.Option(
        parser=number(0.0), help="CPUs each env slot reserves on its node (--backend ray)."),
    ] = DEFAULTS.cpus_per_slot,
    slots_per_node: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer
        min=1, help="At most this many env slots per node (--backend ray).")] = None,
    record_tokens: Annotated[bool, typer.Option(
        help="openai:MODEL: ask the server for token ids and log-probabilities (vLLM's "
             "return_token_ids, logprobs) and record them per call (export --format rl).")] = False,
    env_url: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Run ENV as served by `proofgym serve` at this URL (http://HOST:PORT): one session per "
             "slot, each episode's verdict from the server with its last step.")] = None,
    env_token: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        envvar="PROOFGYM_SERVE_TOKEN", show_envvar=True, help="Bearer token for --env-url.")] = None,
) -> None:
    """Run a policy on an environment and report rewards."""
    from proofgym.cli.env_args import parse_env_args
    from proofgym.core import ConfigError
    from proofgym.errors import ErrorBudgetExceeded, RunFailedError
    from proofgym.eval import evaluate
    from proofgym.eval.runs import train_split_warning
    from proofgym.rollout import make_policy
    from proofgym.rollout.progress import RunProgress

    for name, value in (("--grader-timeout", grader_timeout), ("--client-timeout", client_timeout)):
        if not value > 0:
            raise ConfigError(f"{name} must be a number of seconds > 0 (got {value:g})")
    if backend not in ("local", "ray"):
        raise typer.BadParameter(f"{backend!r}; use 'local' or 'ray'", param_hint="--backend")
    verifier = verifier or DEFAULTS.verifier_backend(backend)
    if verifier not in ("process", "inline", "ray"):
        raise typer.BadParameter(f"{verifier!r}; use 'process', 'ray' or 'inline'", param_hint="--verifier")
    slots = _slots(backend, ray_address, cpus_per_slot, slots_per_node, verifier=verifier)
    if backend == "ray":
        concurrency = _fit_local_cluster(slots, concurrency, ray_address)
    options = {}
    sampled = {"--temperature": temperature, "--top-p": top_p, "--max-tokens": max_tokens,
               "--sampling": sampling, "--sampling-file": sampling_file}
    if policy.startswith("openai:"):
        from proofgym.cli.sampling_args import parse_sampling

        options = {"base_url": base_url, "api_key": api_key, "system_prompt": system_prompt,
                   "version": policy_version, "timeout_s": client_timeout, "record_tokens": record_tokens,
                   "sampling": parse_sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                              pairs=sampling, file=sampling_file)}
    elif base_url is not None:
        raise typer.BadParameter("--base-url is for --policy openai:MODEL", param_hint="--base-url")
    elif given := [name for name, value in sampled.items() if value not in (None, [])]:
        raise typer.BadParameter(f"{', '.join(given)} set the sampling of a model; they are for --policy "
                                 f"openai:MODEL, and --policy {policy} samples nothing", param_hint=given[0])
    env_kwargs = parse_env_args(env_id, env_arg)  # before anything is started or written
    env_factory = None
    if env_url is not None:
        env_factory, env_kwargs = _served(env_id, env_url, env_token, env_arg)
    pol = make_policy(policy, seed=seed, **options)  # an unknown policy is a ConfigError (exit 2)
    if sample is not None and n is not None:
        raise typer.BadParameter("-n and --sample both choose the tasks: give one", param_hint="--sample")
    if split not in (None, "train", "dev", "heldout"):
        raise typer.BadParameter(f"unknown split {split!r}; use train, dev or heldout", param_hint="--split")
    if resume is not None and out is not None and out != resume:
        raise typer.BadParameter("--resume DIR continues the run in DIR; drop --out or make it the same",
                                 param_hint="--out")
    run_name = f"{env_id}-{policy}-s{seed}".replace("/", "_").replace(":", "_")
    claimed = resume is None and out is None  # a default directory, made here
    out = resume or out or fresh_run_dir(Path("runs") / run_name)
    title = f"{env_id} · {policy}"
    if split == "train":
        console.print(f"[bold white on red] WARNING [/] [bold red]{train_split_warning(env_id)}[/]")
    common = {"episodes": n, "sample": sample, "repeats": repeats, "seed": seed,
              "out": None if resume else out, "resume": resume, "split": split, "splits": splits,
              "env_kwargs": env_kwargs}
    # The library runs, grades and judges the run; errors (ProofgymError) are printed once, by
    # the CLI's entry point.
    failure: RunFailedError | None = None
    try:
        _, summary = evaluate(env_id, pol, concurrency=concurrency, verifier=verifier,
                              grader_processes=grader_processes, grader_jobs=grader_jobs,
                              grader_timeout_s=grader_timeout, max_error_rate=max_error_rate,
                              progress=RunProgress(title, console=console), backend=slots,
                              ray_address=ray_address, env_factory=env_factory, **common)
    except RunFailedError as exc:  # recorded: its summary is shown before the error
        failure, summary = exc, exc.summary
    except BaseException:
        if claimed and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # the run never started: leave no empty default directory behind
        raise
    if summary.get("resumed_from"):
        console.print(f"resumed {out}: kept {summary['resumed_from']} finished episodes")
    print_summary(summary, title=f"{env_id} · policy {policy} · {summary['episodes']} episodes")
    console.print(f"wrote {out / 'trajectories.jsonl'}, {out / 'summary.json'} and {out / 'report.html'}")
    if isinstance(failure, ErrorBudgetExceeded):
        console.print(f"[bold red]error:[/] {failure.error_rate:.1%} of the episodes were not scored "
                      f"(grader or episode errors), over --max-error-rate {failure.max_error_rate:.1%}; "
                      f"mean_reward {summary.get('mean_reward')} leaves them out, mean_reward_all "
                      f"{summary.get('mean_reward_all')} counts them as 0. See verify_errors and "
                      "episode_errors in summary.json for the causes.")
        raise typer.Exit(failure.exit_code)
    if failure is not None:
        hint = f"; is the model server at {base_url} running?" if base_url else ""
        raise RunFailedError(f"{failure}{hint}", trajectories=failure.trajectories,
                             summary=summary) from None


def _slots(backend: str, address: str | None, cpus_per_slot: float, slots_per_node: int | None, *,
           verifier: str) -> Any:
    """The slot backend (``--backend``); the Ray options make sense only with ``ray`` (the
    address also with ``--verifier ray``)."""
    if backend == "local":
        stray_address = address is not None and verifier != "ray"
        if stray_address or slots_per_node is not None or cpus_per_slot != DEFAULTS.cpus_per_slot:
            raise typer.BadParameter("--ray-address (without --verifier ray), --cpus-per-slot and "
                                 "--slots-per-node are for --backend ray", param_hint="--backend")
        return "local"
    from proofgym.rollout.ray_slots import RaySlots
    from proofgym.runtimes.ray_cluster import require_ray

    require_ray()  # a one-line usage error naming the install command when Ray is missing
    return RaySlots(address=address, cpus_per_slot=cpus_per_slot, slots_per_node=slots_per_node)


def _served(env_id: str, url: str, token: str | None,
            env_arg: list[str] | None) -> tuple[Any, dict[str, Any]]:
    """The factory of RemoteEnvs over ``url`` and the served env's arguments (for the contract),
    after checking the server serves ``env_id``."""
    import functools

    from proofgym.core import ConfigError
    from proofgym.remote import RemoteEnv

    if env_arg:
        raise typer.BadParameter("a served env was built by its server: drop --env-arg (pass it to "
                                 "`proofgym serve`)", param_hint="--env-arg")
    probe = RemoteEnv(url, token=token)
    try:
        if probe.served_env_id != env_id:
            raise ConfigError(f"the server at {url} serves {probe.served_env_id}, not {env_id}")
        return functools.partial(RemoteEnv, url, token=token), dict(probe.served_env_kwargs)
    finally:
        probe.close()


def _fit_local_cluster(slots: Any, concurrency: int, address: str | None) -> int:
    """A cluster of this machine (no address given) runs at most the slots it has room for, with
    a warning; a cluster named by an address keeps refusing (the run would not be the one asked for)."""
    import os

    if address is not None or os.environ.get("RAY_ADDRESS"):
        return concurrency
    room = slots.room()
    if 0 < room < concurrency:
        console.print(f"[yellow]warning:[/] the local Ray cluster has room for {room} env slots "
                      f"({slots.cpus_per_slot:g} CPUs per slot); running -c {room} instead of "
                      f"-c {concurrency} "
                      "(lower --cpus-per-slot for more, or pass --ray-address of a larger cluster)",
                      highlight=False)
        return room
    return concurrency


def fresh_run_dir(base: Path) -> Path:
    """``base``, or ``base-2``, ``base-3``, ... : the first that holds no run yet. Only the default
    directory is chosen this way; an explicit ``--out`` that holds a run is refused (use
    ``--resume``), so a run is never overwritten or silently mixed with another."""
    candidate, n = base, 1
    while True:
        try:  # claimed by creating it: two runs started at once never share a directory
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            n += 1
        candidate = base.with_name(f"{base.name}-{n}")


def print_summary(summary: dict, *, title: str) -> None:
    from proofgym.cli.summary_table import summary_table

    console.print(summary_table(summary, title=title))
