"""``proofgym image lock|build|ls``: environment images for sandboxes (progress on stderr)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Annotated, Optional

import typer

from proofgym.cli.console import err_console

image_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Build and list environment images (what sandboxes run on).")


def _progress(line: str) -> None:
    err_console.print(line, highlight=False, markup=False, soft_wrap=True)


@image_app.command("lock")
def lock_command(
    packages: Annotated[list[str], typer.Argument(help="Requirements to pin (NAME or NAME==VER); "
                                                       "their dependencies are pinned too.")],
    output: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        "--output", "-o", help="Write the lock here (default: stdout).")] = None,
    find_links: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045 - typer
        help="Resolve only from these wheel directories (no index).")] = None,
) -> None:
    """Pin packages to wheels with their sha256 (pip download, wheels only): a lock file for
    `proofgym image build --lock`."""
    from proofgym.runtimes.sandbox import lock_packages

    lock = lock_packages(list(packages), find_links=list(find_links or ()), progress=_progress)
    if output is None:
        typer.echo(lock.to_text(), nl=False)
    else:
        output.write_text(lock.to_text())
        _progress(f"wrote {output}")


@image_app.command("build")
def build_command(
    lock: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="A lock file (name==version --hash=sha256:... lines): a packages image.")] = None,
    oci: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="An OCI image layout directory or a docker/podman save tarball.")] = None,
    ref: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="With --oci: which image of several (its ref name or repo tag).")] = None,
    python: Annotated[str, typer.Option(help="With --oci: the image's Python interpreter.")] = "python3",
    find_links: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045 - typer
        help="With --lock: install from these wheel directories instead of PyPI.")] = None,
) -> None:
    """Build an image into the cache (once: a built image is reused) and print its digest."""
    from proofgym.runtimes.sandbox import ImageError, OciImage, PackagesImage, WheelLock

    if (lock is None) == (oci is None):
        raise ImageError("pass exactly one of --lock FILE (a packages image) or --oci PATH "
                         "(an OCI image)")
    if oci is not None:
        image = OciImage(str(oci), ref=ref, python=python).build(progress=_progress)
        try:
            image.check()
        except ImageError as exc:  # built and cached, but no sandbox can boot on it as it is
            _progress(f"warning: {exc}")
    else:
        assert lock is not None
        image = PackagesImage(WheelLock.load(lock), tuple(str(p) for p in find_links or ())
                              ).build(progress=_progress)
    typer.echo(image.digest)


@image_app.command("ls")
def ls_command() -> None:
    """List the images built into the cache (newest first)."""
    from proofgym.runtimes.sandbox import cache_root, list_images

    images = list_images()
    if not images:
        _progress(f"no images built in {cache_root()}")
        return
    for rec in images:
        when = datetime.datetime.fromtimestamp(rec["built"]).strftime("%Y-%m-%d %H:%M")
        what = (" ".join(rec.get("packages", [])) if rec.get("kind") == "packages"
                else f"{rec.get('source')}{' ' + rec['ref'] if rec.get('ref') else ''} "
                     f"({rec.get('layers')} layers)")
        typer.echo(f"{rec.get('digest', '?')[:19]}  {rec.get('kind', '?'):8}  {when}  {what}")
