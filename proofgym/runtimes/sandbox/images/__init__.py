"""Environment images: what a sandbox runs on instead of the host-staged minimal system.

A *system* (:class:`~proofgym.runtimes.sandbox.system.SandboxSystem`) is read-only,
content-addressed (``digest``) and cached across runs (:mod:`.cache`). Three exist:

* :class:`~proofgym.runtimes.sandbox.system.MinimalSystem` (the default): the host's shell,
  core utilities and Python, with a few host packages (pytest) in its ``site-packages``.
* :class:`PackagesImage`: the minimal system without any host package, plus Python packages
  installed from pinned wheels (a :class:`WheelLock`; :func:`lock_packages` pins names).
* :class:`OciImage`: an OCI image layout directory or a ``docker save`` tarball, its layers
  unpacked once and mounted as read-only overlay lowers.

Usage::

    from proofgym.runtimes.sandbox import SandboxRuntime, lock_packages, PackagesImage, OciImage

    lock = lock_packages(["pytest", "attrs"])       # pip download + sha256 of each wheel
    image = PackagesImage(lock).build(progress=print)
    runtime = SandboxRuntime(snapshot="repo/", image=image)   # episodes on the image
    run = run_pytest("repo/", changes, tests=[...], image=image)   # gradings on it too

    oci = OciImage("swe-image.tar").build()          # or an image layout directory
    runtime = SandboxRuntime(snapshot="repo/", image=oci)

The digest is part of the rollout contract (``runtime.image.digest``) and of every artifact's
``meta["image"]``. The threat model holds on every image: the same uid mapping, seccomp
filter, masked ``/proc``, no network, and only ``/workspace`` and ``/tmp`` writable.
"""

from proofgym.runtimes.sandbox.images.cache import cache_root, list_images
from proofgym.runtimes.sandbox.images.layers import LayerError, unpack_layer
from proofgym.runtimes.sandbox.images.modules import (
    default_system_modules,
    installed_modules,
    own_module_refusal,
    wheel_modules,
)
from proofgym.runtimes.sandbox.images.oci import OciImage
from proofgym.runtimes.sandbox.images.packages import (
    ImageError,
    PackagesImage,
    Pin,
    WheelLock,
    lock_packages,
)

__all__ = ["ImageError", "LayerError", "OciImage", "PackagesImage", "Pin", "WheelLock",
           "cache_root", "default_system_modules", "installed_modules", "list_images",
           "lock_packages", "own_module_refusal", "unpack_layer", "wheel_modules"]
