"""Imported into grader worker processes before they fork: pays math-verify's first-call cost
(its parser builds lazily, most of a second) once, instead of inside a job's timeout."""

import contextlib

from proofgym.verify.graders import MathCheckStarved, math_equivalent

# the parser is built in this process before the check; a busy host starving the check itself
# costs nothing here (the next check starts a fresh checker)
with contextlib.suppress(MathCheckStarved):
    math_equivalent("1/2", "0.5")
