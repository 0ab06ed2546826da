"""Imported into grader worker processes before they fork: pays math-verify's first-call cost
(its parser builds lazily, most of a second) once, instead of inside a job's timeout."""

from proofgym.verify.answers import math_equivalent

math_equivalent("1/2", "0.5")
