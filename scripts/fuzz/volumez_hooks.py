"""schemathesis hook of `scripts/fuzz.sh volumez`: applies the reviewed
allow-list (volumez-allowlist.toml) to the Volumez reference as it is
loaded, in memory. The reference file itself is read in place, never copied
or changed. Each departure names the operations it applies to and why."""

import json
import os
import tomllib

import schemathesis

ERROR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def operations(raw_schema, names):
    """(name, operation) of the operations a departure names ("*": all)."""
    for path, item in raw_schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                name = f"{method.upper()} {path}"
                if "*" in names or name in names:
                    yield name, item[method]


def apply(raw_schema, departure):
    names = departure["operations"]
    matched = list(operations(raw_schema, names))
    unknown = set(names) - {"*"} - {name for name, _ in matched}
    if unknown:
        raise ValueError(f"allow-list: no such operation: {sorted(unknown)}")
    for _, operation in matched:
        for status in departure.get("add-statuses", []):
            operation.setdefault("responses", {}).setdefault(
                str(status), {"description": departure["reason"], **ERROR}
            )
        if departure.get("public"):
            operation["security"] = []
        fields = departure.get("optional-request-fields")
        if fields:
            request_schema(raw_schema, operation)["required"] = [
                f for f in request_schema(raw_schema, operation).get("required", []) if f not in fields
            ]
        for field, constraints in departure.get("request-properties", {}).items():
            request_schema(raw_schema, operation)["properties"][field].update(constraints)
        for parameter in operation.get("parameters", []):
            constraints = departure.get("parameters", {}).get(parameter["name"])
            if constraints:
                parameter["schema"].update(constraints)
            fields = departure.get("parameter-fields", {}).get(parameter["name"])
            if fields:
                parameter.update(fields)


def request_schema(raw_schema, operation):
    """The operation's own copy of its request body schema, so that a
    departure of one request changes neither responses nor other requests."""
    content = operation["requestBody"]["content"]["application/json"]
    schemas = raw_schema["components"]["schemas"]
    ref = content["schema"]["$ref"]
    name = ref.rsplit("/", 1)[1]
    own = f"{operation['operationId']}_request"
    if name != own:
        copy = json.loads(json.dumps(schemas[name]))
        schemas[own] = copy
        content["schema"] = {"$ref": f"#/components/schemas/{own}"}
    return schemas[own]


def add_operation(raw_schema, spec):
    """An svs extension on a path of the reference, so the run knows it
    exists (else it expects 405 there)."""
    method, path = spec["name"].split(" ", 1)
    operation = json.loads(spec["operation"])
    raw_schema["paths"][path][method.lower()] = operation


@schemathesis.hook
def before_load_schema(context, raw_schema):
    with open(os.environ["FUZZ_ALLOWLIST"], "rb") as f:
        allowlist = tomllib.load(f)
    implemented = set(allowlist["implemented"])
    for path in list(raw_schema.get("paths", {})):
        item = raw_schema["paths"][path]
        for method in METHODS:
            if method in item and f"{method.upper()} {path}" not in implemented:
                del item[method]
        if not any(method in item for method in METHODS):
            del raw_schema["paths"][path]
    missing = implemented - {name for name, _ in operations(raw_schema, ["*"])}
    if missing:
        raise ValueError(f"allow-list: implemented operations missing from the reference: {sorted(missing)}")
    for spec in allowlist.get("extension", []):
        add_operation(raw_schema, spec)
    for departure in allowlist.get("departure", []):
        apply(raw_schema, departure)
