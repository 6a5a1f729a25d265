"""The export's JSON Schemas (docs/schemas), each checked against its
metaschema and built into a validator once per process: building one costs
far more than validating a record with it, and the tests validate thousands."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"


@functools.cache
def schema(name: str) -> jsonschema.protocols.Validator:
    loaded = json.loads((SCHEMAS / f"{name}.json").read_text())
    validator_class = jsonschema.validators.validator_for(loaded)
    validator_class.check_schema(loaded)
    return validator_class(loaded, format_checker=validator_class.FORMAT_CHECKER)
