"""An operator's interventions on a round, each signed by the operator on their
own machine: void, resume, correct an outcome or a misread step; and the
exact bytes to sign for one (`fact-to-sign`)."""

from __future__ import annotations

from ledger.http import models, responses, views
from ledger.http.dependencies import OPERATOR, CasinoDep, IdempotencyKey, RoundId, ServiceDep
from ledger.http.routing import Router

router = Router()


@router.endpoint("POST", "/rounds/{round_id}/void", (OPERATOR,), responses.Voided)
def void_round(
    round_id: RoundId,
    body: models.OperatorReason,
    key: IdempotencyKey,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.Voided:
    """Void a round (every stake back), signed by the operator."""
    returns = casino.void_round(
        request_id=key,
        round_id=round_id,
        reason=body.reason,
        operator=service.operator(body.operator),
    )
    return responses.Voided.model_validate({"results": returns})


@router.endpoint("POST", "/rounds/{round_id}/resume", (OPERATOR,), responses.Resumed)
def resume_round(
    round_id: RoundId,
    body: models.OperatorReason,
    key: IdempotencyKey,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.Resumed:
    """Resume an interrupted round, signed by the operator."""
    casino.resume_round(
        request_id=key,
        round_id=round_id,
        reason=body.reason,
        operator=service.operator(body.operator),
    )
    return responses.Resumed(resumed=round_id)


@router.endpoint("POST", "/rounds/{round_id}/corrections", (OPERATOR,), responses.Settlement)
def correct(
    round_id: RoundId,
    body: models.Correction,
    key: IdempotencyKey,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.Settlement:
    """Correct a settled physical round's outcome, signed: an alias of `/step-corrections`.

    Of the round's last action, the right result given as an outcome."""
    results = casino.correct(
        request_id=key,
        round_id=round_id,
        outcome=body.outcome,
        reason=body.reason,
        operator=service.operator(body.operator),
    )
    return responses.Settlement.model_validate({"results": results})


@router.endpoint("POST", "/rounds/{round_id}/step-corrections", (OPERATOR,), responses.Settlement)
def correct_step(
    round_id: RoundId,
    body: models.StepCorrection,
    key: IdempotencyKey,
    casino: CasinoDep,
    service: ServiceDep,
) -> responses.Settlement:
    """Correct what a physical table's device misread at one action, signed."""
    results = casino.correct_step(
        request_id=key,
        round_id=round_id,
        step=body.step,
        drawn=body.drawn,
        reason=body.reason,
        operator=service.operator(body.operator),
    )
    return responses.Settlement.model_validate({"results": results})


@router.endpoint("POST", "/rounds/{round_id}/fact-to-sign", (OPERATOR,), responses.OperatorFact)
def fact_to_sign(
    round_id: RoundId, body: models.FactToSign, casino: CasinoDep
) -> responses.OperatorFact:
    """The exact bytes an operator signs (Ed25519) for a void, resume or correction
    with these arguments; nothing is recorded. Send the signature, base64, with
    the command itself."""
    message = casino.fact_to_sign(
        command=body.command,
        round_id=round_id,
        key_id=body.key_id,
        reason=body.reason,
        outcome=body.outcome,
        step=body.step,
        drawn=body.drawn,
    )
    return views.operator_fact(body.key_id, message)
