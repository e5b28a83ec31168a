"""Validates rendered Kubernetes manifests offline against the API's schema
as Debian's python3-kubernetes carries it (its models: every field name and
type of every object, and the required ones).

    kubectl kustomize deploy/k8s/base | python3 k8s_validate.py

Every document must be a known kind; every key must be a field of its
object (no typos such as `readinessprobe` that the API server would drop
or refuse); every value must have the field's type; required fields must be
there. Exits 0 and prints one line per object, or 1 with every problem."""
import datetime
import json
import re
import sys

import kubernetes.client as k8s
import yaml


def model_of(api_version, kind):
    version = api_version.split("/")[-1]
    return getattr(k8s, version[0].upper() + version[1:] + kind, None)


def check(value, type_name, path, problems):
    if value is None:
        return
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list")
            return
        for i, item in enumerate(value):
            check(item, m.group(1), f"{path}[{i}]", problems)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            problems.append(f"{path}: expected a map")
            return
        for key, item in value.items():
            # quantities (resources) may be written as numbers
            if m.group(1) == "str" and isinstance(item, (int, float)):
                continue
            check(item, m.group(1), f"{path}.{key}", problems)
        return
    simple = {"str": str, "int": int, "bool": bool, "float": (int, float)}
    if type_name in simple:
        ok = isinstance(value, simple[type_name]) and not (
            type_name == "int" and isinstance(value, bool))
        if not ok:
            problems.append(f"{path}: expected {type_name}, got {value!r}")
        return
    if type_name in ("object", "datetime"):
        return  # int-or-string, raw extension, times
    model = getattr(k8s, type_name, None)
    if model is None:
        problems.append(f"{path}: unknown type {type_name}")
        return
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object ({type_name})")
        return
    fields = {json_key: attr for attr, json_key in model.attribute_map.items()}
    for key, item in value.items():
        if key not in fields:
            problems.append(f"{path}.{key}: not a field of {type_name}")
            continue
        check(item, model.openapi_types[fields[key]], f"{path}.{key}", problems)


class Response:  # what ApiClient.deserialize reads
    def __init__(self, doc):
        self.data = json.dumps(doc, default=str)


def main():
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d is not None]
    problems = []
    if not docs:
        problems.append("no documents")
    client = k8s.ApiClient()
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        model = model_of(doc.get("apiVersion", ""), doc.get("kind", ""))
        if model is None:
            problems.append(f"{name}: unknown apiVersion/kind")
            continue
        before = len(problems)
        check(doc, model.__name__, name, problems)
        try:  # the models' own checks: required fields, allowed values
            client.deserialize(Response(doc), model.__name__)
        except (ValueError, TypeError) as e:
            problems.append(f"{name}: {e}")
        if len(problems) == before:
            print(f"ok {doc['apiVersion']} {name}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
