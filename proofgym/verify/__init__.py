"""Verification: verdicts, rubrics, built-in graders, the LLM judge, and re-grading.

Three packages, each with a face: :mod:`.graders` (what decides a score), :mod:`.pool` (the one
road every grade takes), :mod:`.sandboxed` (grading code in a fresh sandbox); and
:mod:`.regrade` (grading a finished run again)."""

from proofgym.core import Verdict, grade
from proofgym.verify.graders import (
    GRADERS,
    JUDGE_PROMPTS,
    AnswerGrader,
    Component,
    ExactMatch,
    GraderSpecError,
    HedgedAnswer,
    JudgeError,
    JudgeTimeout,
    LLMJudge,
    MathCheckStarved,
    MathMatch,
    MultiRubric,
    NormalizedMatch,
    NumericMatch,
    QATask,
    RegexMatch,
    Rubric,
    boxed_contents,
    extract_final_answer,
    make_grader,
    math_equivalent,
    normalize_text,
    score_all,
)

__all__ = [
    "GRADERS",
    "JUDGE_PROMPTS",
    "AnswerGrader",
    "Component",
    "ExactMatch",
    "GraderSpecError",
    "HedgedAnswer",
    "JudgeError",
    "JudgeTimeout",
    "LLMJudge",
    "MathCheckStarved",
    "MathMatch",
    "MultiRubric",
    "NormalizedMatch",
    "NumericMatch",
    "QATask",
    "RegexMatch",
    "Rubric",
    "Verdict",
    "boxed_contents",
    "extract_final_answer",
    "grade",
    "make_grader",
    "math_equivalent",
    "normalize_text",
    "score_all",
]
