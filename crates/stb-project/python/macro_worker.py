"""StreamBuild's macro worker: loads the project's macros/**/*.py and calls them on request.

Speaks one JSON object per line on stdin/stdout. Started by `stb` only when a project has
macro files; needs nothing but the Python standard library. The module
`streambuild.compiler.macros.models` is provided here, so user files may import
`PipelineNamingContext` (and `MacroContext`) without any package installed.
"""

import ast
import dataclasses
import enum
import hashlib
import inspect
import json
import sys
import traceback
import types

PROTOCOL_OUT = sys.stdout
sys.stdout = sys.stderr  # a macro's print() must not corrupt the protocol


class PipelineMode(str, enum.Enum):
    DIRECT = "direct"
    VIRTUAL = "virtual"


@dataclasses.dataclass(frozen=True)
class PipelineNamingContext:
    name: str
    source_name: "str | None"
    model_names: tuple
    relative_directory: str
    mode: PipelineMode


@dataclasses.dataclass(frozen=True)
class MacroContext:
    adapter_name: str
    dialect: str
    target_name: str
    database: str
    schema: "str | None"
    virtual_environments: bool
    variables: types.MappingProxyType


def install_shim():
    names = ["streambuild", "streambuild.compiler", "streambuild.compiler.macros", "streambuild.compiler.macros.models"]
    for name in names:
        sys.modules.setdefault(name, types.ModuleType(name))
    models = sys.modules["streambuild.compiler.macros.models"]
    models.PipelineNamingContext = PipelineNamingContext
    models.PipelineMode = PipelineMode
    models.MacroContext = MacroContext
    sys.modules["streambuild.compiler.macros"].models = models


MACROS = {}  # name -> (function, relative file, line)
FILES = {}  # absolute path -> relative path


def send(payload):
    PROTOCOL_OUT.write(json.dumps(payload) + "\n")
    PROTOCOL_OUT.flush()


def located_error(error, fallback_file=None, fallback_line=None):
    """The innermost traceback frame inside a macro file, else the given fallback."""
    file, line = fallback_file, fallback_line
    if isinstance(error, SyntaxError) and error.filename in FILES:
        file, line = FILES[error.filename], error.lineno
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename in FILES:
            file, line = FILES[frame.filename], frame.lineno
    return {"message": f"{type(error).__name__}: {error}", "file": file, "line": line}


def load(files):
    flags = __import__("__future__").annotations.compiler_flag
    for entry in files:
        path, relative = entry["path"], entry["relative"]
        FILES[path] = relative
        try:
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
            tree = ast.parse(source, filename=path)
            code = compile(source, path, "exec", flags=flags, dont_inherit=True)
            module_name = "streambuild_project_macros_" + hashlib.sha1(path.encode()).hexdigest()[:12]
            module = types.ModuleType(module_name)
            module.__file__ = path
            exec(code, module.__dict__)
        except Exception as error:  # noqa: BLE001 - reported to the user with its location
            return {"ok": False, "error": located_error(error, relative, 1)}
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            function = module.__dict__.get(node.name)
            if not inspect.isfunction(function) or function.__module__ != module_name:
                continue
            if node.name in MACROS:
                first = MACROS[node.name][1]
                return {
                    "ok": False,
                    "error": {
                        "message": f"Macro name collision for '{node.name}' in '{first}' and '{relative}'",
                        "file": relative,
                        "line": node.lineno,
                        "collision": True,
                    },
                }
            MACROS[node.name] = (function, relative, node.lineno)
    described = []
    for name, (function, relative, line) in sorted(MACROS.items()):
        params = [
            {"name": p.name, "annotation": p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", None) if p.annotation is not inspect.Parameter.empty else None, "kind": p.kind.name}
            for p in inspect.signature(function).parameters.values()
        ]
        doc = (inspect.getdoc(function) or "").split("\n\n")[0].strip()
        described.append({"name": name, "file": relative, "line": line, "params": params, "doc": doc})
    return {"ok": True, "macros": described}


def call(name, args, kwargs, naming_context=None):
    function, relative, line = MACROS[name]
    if naming_context is not None:
        context = dict(naming_context)
        context["model_names"] = tuple(context["model_names"])
        context["mode"] = PipelineMode(context["mode"])
        args = [PipelineNamingContext(**context)]
    try:
        value = function(*args, **kwargs)
    except TypeError as error:
        frames = traceback.extract_tb(error.__traceback__)
        if len(frames) <= 1:
            return {"ok": False, "error": {"message": f"could not be called: {error}", "file": relative, "line": line}}
        return {"ok": False, "error": located_error(error, relative, line)}
    except Exception as error:  # noqa: BLE001 - reported to the user with its location
        return {"ok": False, "error": located_error(error, relative, line)}
    if isinstance(value, str):
        return {"ok": True, "type": "str", "value": value}
    try:
        json.dumps(value)
        shown = value
    except (TypeError, ValueError):
        shown = repr(value)
    return {"ok": True, "type": type(value).__name__, "value": shown}


NESTED_PREFIX = "__stb_macro__"


class LiteralError(Exception):
    """An argument that is not a Python literal or a nested macro call."""


def wants_context(function):
    parameters = list(inspect.signature(function).parameters.values())
    if not parameters or parameters[0].name != "ctx":
        return False
    annotation = parameters[0].annotation
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if name.split(".")[-1] != "MacroContext":
        raise TypeError("must annotate ctx as MacroContext")
    return True


def invoke(name, args, kwargs, context):
    function, relative, line = MACROS[name]
    if "ctx" in kwargs:
        raise TypeError(f"Macro '@{name}' reserves keyword 'ctx'")
    if wants_context(function):
        args = [context, *args]
    return function(*args, **kwargs)


def evaluate(node, context):
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, int, float, bool))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, ast.List):
        return [evaluate(item, context) for item in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(evaluate(item, context) for item in node.elts)
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise LiteralError("must use only Python literals and nested macro calls (no ** in dicts)")
        return {evaluate(key, context): evaluate(value, context) for key, value in zip(node.keys, node.values)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith(NESTED_PREFIX):
        inner = node.func.id[len(NESTED_PREFIX):]
        if inner not in MACROS:
            raise LiteralError(f"Unknown macro '@{inner}'")
        args, kwargs = arguments(node, context)
        return invoke(inner, args, kwargs, context)
    raise LiteralError("must use only Python literals and nested macro calls")


def arguments(call, context):
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(keyword.arg is None for keyword in call.keywords):
        raise LiteralError("must use only Python literals and nested macro calls (no *args or **kwargs)")
    args = [evaluate(arg, context) for arg in call.args]
    kwargs = {}
    for keyword in call.keywords:
        if keyword.arg in kwargs:
            raise LiteralError(f"repeats keyword '{keyword.arg}'")
        kwargs[keyword.arg] = evaluate(keyword.value, context)
    return args, kwargs


def freeze(value):
    if isinstance(value, dict):
        return types.MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(freeze(item) for item in value)
    return value


def expand(name, args_text, raw_context):
    """Runs `@name(<args_text>)` as written in SQL; nested calls arrive renamed with NESTED_PREFIX."""
    function, relative, line = MACROS[name]
    context = MacroContext(
        adapter_name="clickhouse",
        dialect="clickhouse",
        target_name=raw_context["target_name"],
        database=raw_context["database"],
        schema=None,
        virtual_environments=raw_context["virtual_environments"],
        variables=freeze(raw_context["variables"]),
    )
    try:
        tree = ast.parse(f"__call__({args_text})", mode="eval")
    except SyntaxError as error:
        return {"ok": False, "error": {"message": f"arguments could not be parsed: {error.msg}", "kind": "arguments"}}
    try:
        args, kwargs = arguments(tree.body, context)
        value = invoke(name, args, kwargs, context)
    except LiteralError as error:
        return {"ok": False, "error": {"message": str(error), "kind": "arguments"}}
    except TypeError as error:
        frames = traceback.extract_tb(error.__traceback__)
        if all(frame.filename not in FILES for frame in frames):
            return {"ok": False, "error": {"message": f"could not be called: {error}", "file": relative, "line": line, "kind": "call"}}
        return {"ok": False, "error": located_error(error, relative, line)}
    except Exception as error:  # noqa: BLE001 - reported to the user with its location
        return {"ok": False, "error": located_error(error, relative, line)}
    if not isinstance(value, str):
        return {"ok": False, "error": {"message": f"must return a SQL string when used directly in SQL, not {type(value).__name__}", "file": relative, "line": line, "kind": "result"}}
    return {"ok": True, "type": "str", "value": value}


def main():
    install_shim()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        op = request.get("op")
        if op == "load":
            send(load(request["files"]))
        elif op == "expand":
            send(expand(request["macro"], request["args"], request["context"]))
        elif op == "call":
            send(call(request["macro"], request.get("args", []), request.get("kwargs", {}), request.get("naming_context")))
        else:
            send({"ok": False, "error": {"message": f"unknown operation {op!r}"}})


if __name__ == "__main__":
    main()
