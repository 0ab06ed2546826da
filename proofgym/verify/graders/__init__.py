"""Graders: answer matchers, the symbolic-math check, rubrics, QA tasks and the LLM judge.

A grader is a rubric component (``grader(trace, runtime) -> float``); a :class:`Rubric` combines
components into a verdict.
"""

from proofgym.verify.graders.answers import (
    HedgedAnswer,
    MathCheckStarved,
    boxed_contents,
    extract_final_answer,
    math_equivalent,
    normalize_text,
)
from proofgym.verify.graders.judge import JUDGE_PROMPTS, JudgeError, JudgeTimeout, LLMJudge, UngradedReply
from proofgym.verify.graders.matchers import (
    GRADERS,
    AnswerGrader,
    ExactMatch,
    GraderSpecError,
    MathMatch,
    NormalizedMatch,
    NumericMatch,
    RegexMatch,
    make_grader,
    parse_number,
)
from proofgym.verify.graders.qa import QATask
from proofgym.verify.graders.rubric import Component, MultiRubric, Rubric, score_all

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
    "UngradedReply",
    "boxed_contents",
    "extract_final_answer",
    "make_grader",
    "math_equivalent",
    "normalize_text",
    "parse_number",
    "score_all",
]
