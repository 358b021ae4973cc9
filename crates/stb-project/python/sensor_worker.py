"""StreamBuild's sensor worker: loads a project's providers/**/*.py and sensors/**/*.py,
describes what they declare, and runs one tick of a sensor at a time.

Speaks one JSON object per line on stdin/stdout, as the macro worker does. The modules a
sensor file imports (`streambuild.sensors`, `streambuild.events`, `streambuild.providers`)
are provided here, so files written for the reference load without its package. Providers
are pydantic-settings models, as the reference's are: the interpreter needs
pydantic-settings only when the project has provider files.
"""

import dataclasses
import enum
import hashlib
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import threading
import time
import traceback
import types
import typing

# The protocol has file descriptor 1 to itself: a handler's print() goes to stderr, and so
# does what a subprocess it starts writes to its standard output.
PROTOCOL_OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr


class _TextEnum(str, enum.Enum):
    """A string enum (the reference's are `StrEnum`s): equal to its value, printed as it."""

    def __str__(self):
        return self.value


class DefaultSensorStatus(_TextEnum):
    RUNNING = "running"
    STOPPED = "stopped"


class StepPolicy(_TextEnum):
    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"


class AuditTransition(_TextEnum):
    NEW_FAILURE = "new_failure"
    STILL_FAILING = "still_failing"
    RECOVERED = "recovered"
    STILL_PASSING = "still_passing"


class ObservedCommand(_TextEnum):
    AUDIT = "audit"
    TEST = "test"
    BUILD = "build"
    DEPLOYMENT_PROMOTE = "deployment promote"
    JANITOR = "janitor"
    DESTROY_PIPELINES = "destroy pipelines"
    RESET_TARGET = "reset target"


class SensorError(Exception):
    """A sensor declared or used against the rules."""


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclasses.dataclass(frozen=True)
class SensorRetryPolicy:
    max_attempts: int = 1
    backoff_seconds: float = 0.0

    def __post_init__(self):
        if not isinstance(self.max_attempts, int) or isinstance(self.max_attempts, bool):
            raise SensorError("SensorRetryPolicy.max_attempts must be a whole number")
        if self.max_attempts < 1:
            raise SensorError("SensorRetryPolicy.max_attempts must be at least 1")
        if self.max_attempts > 1_000_000:
            raise SensorError("SensorRetryPolicy.max_attempts must be at most 1000000")
        if not _finite(self.backoff_seconds):
            raise SensorError("SensorRetryPolicy.backoff_seconds must be a finite number")
        if self.backoff_seconds < 0:
            raise SensorError("SensorRetryPolicy.backoff_seconds must not be negative")


@dataclasses.dataclass(frozen=True)
class SkipReason:
    reason: str


@dataclasses.dataclass(frozen=True)
class PollingSensorResult:
    cursor: "str | None" = None


class SensorEvent:
    """The events sensors react to: derived from what the warehouse records, never emitted."""


@dataclasses.dataclass(frozen=True)
class AuditCompleted(SensorEvent):
    id: str
    audit_name: str
    status: str
    previous_status: "str | None"
    transition: AuditTransition
    severity: "str | None"
    failure_count: int
    target: str
    trigger: str
    completed_at: str
    binding_key: str
    invocation_id: str
    scheduled_for: "str | None" = None
    error_message: "str | None" = None
    sample_column_names: tuple = ()
    sample_rows: tuple = ()


@dataclasses.dataclass(frozen=True)
class RunCompleted(SensorEvent):
    id: str
    command: ObservedCommand
    mode: "str | None"
    outcome: str
    exit_code: int
    target: str
    deployment_id: "str | None"
    selected_node_count: int
    error_message: "str | None"
    completed_at: str


EVENT_TYPES = {"AuditCompleted": AuditCompleted, "RunCompleted": RunCompleted}
EventT = typing.TypeVar("EventT")


class EventSensorContext(typing.Generic[EventT]):
    """What an event sensor's handler is given: the event, the named target, durable steps."""

    def __init__(self, event, target, step):
        self._event = event
        self._target = target
        self._step = step

    @property
    def event(self):
        return self._event

    @property
    def target(self):
        return self._target

    def step(self, key, fn, policy=StepPolicy.AT_LEAST_ONCE):
        return self._step(key, fn, StepPolicy(policy))


class PollingSensorContext:
    """What a polling sensor's handler is given: its last cursor, when it last succeeded."""

    def __init__(self, cursor, last_success_at, target):
        self._cursor = cursor
        self._last_success_at = last_success_at
        self._target = target

    @property
    def cursor(self):
        return self._cursor

    @property
    def last_success_at(self):
        return self._last_success_at

    @property
    def target(self):
        return self._target


class SensorDeclaration:
    """A decorated handler: still callable, carrying what the decorator declared."""

    def __init__(self, fn, kind, name, options):
        if not name:
            raise SensorError("a sensor needs a non-empty name")
        if not _finite(options["timeout_seconds"]) or options["timeout_seconds"] <= 0:
            raise SensorError(f"{kind}_sensor timeout_seconds must be positive")
        self.fn = fn
        self.kind = kind
        self.name = name
        self.options = options
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def _names(values):
    return None if values is None else sorted({str(v) for v in values})


def _retry(policy):
    policy = policy if policy is not None else SensorRetryPolicy()
    if not isinstance(policy, SensorRetryPolicy):
        raise SensorError("retry_policy must be a SensorRetryPolicy")
    return policy


def event_sensor(
    *,
    on,
    name=None,
    targets=None,
    triggers=None,
    maximum_event_age_seconds=None,
    default_status=DefaultSensorStatus.STOPPED,
    retry_policy=None,
    timeout_seconds=60.0,
):
    if on not in (AuditCompleted, RunCompleted):
        label = getattr(on, "__name__", repr(on))
        raise SensorError(
            f"Unsupported sensor event type '{label}'; event sensors react to streambuild.events catalog events"
        )
    if maximum_event_age_seconds is not None and (
        not _finite(maximum_event_age_seconds) or maximum_event_age_seconds <= 0
    ):
        raise SensorError("event_sensor maximum_event_age_seconds must be positive")

    def declare(fn):
        return SensorDeclaration(
            fn,
            "event",
            name if name is not None else fn.__name__,
            {
                "event_type": on.__name__,
                "targets": _names(targets),
                "triggers": _names(triggers),
                "maximum_event_age_seconds": maximum_event_age_seconds,
                "default_status": DefaultSensorStatus(default_status),
                "retry_policy": _retry(retry_policy),
                "timeout_seconds": float(timeout_seconds),
            },
        )

    return declare


def polling_sensor(
    *,
    minimum_interval_seconds,
    name=None,
    default_status=DefaultSensorStatus.STOPPED,
    retry_policy=None,
    timeout_seconds=60.0,
):
    if not _finite(minimum_interval_seconds) or minimum_interval_seconds <= 0:
        raise SensorError("polling_sensor minimum_interval_seconds must be positive")

    def declare(fn):
        return SensorDeclaration(
            fn,
            "polling",
            name if name is not None else fn.__name__,
            {
                "minimum_interval_seconds": float(minimum_interval_seconds),
                "default_status": DefaultSensorStatus(default_status),
                "retry_policy": _retry(retry_policy),
                "timeout_seconds": float(timeout_seconds),
            },
        )

    return declare


_PROVIDER = []  # the Provider base, made on first use (it needs pydantic-settings)
PROVIDER_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def provider_base():
    if _PROVIDER:
        return _PROVIDER[0]
    try:
        from pydantic_settings import BaseSettings, SettingsConfigDict
    except ImportError as error:
        raise ImportError(
            "streambuild.providers needs pydantic-settings: providers are pydantic-settings "
            f"models ({error}); install it (pip install pydantic-settings) into the Python "
            "that stb runs sensors with (STB_PYTHON, else python3)"
        ) from error

    class Provider(BaseSettings):
        """A resource injected into sensor handlers by name, its settings from the environment."""

        provider_name: typing.ClassVar[typing.Optional[str]] = None
        model_config = SettingsConfigDict(extra="forbid", arbitrary_types_allowed=True)

        @classmethod
        def name(cls):
            if cls.provider_name:
                return cls.provider_name
            return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()

        def setup(self, ctx):
            """Called once per tick, before the provider's first use."""

        def teardown(self):
            """Called at the end of a tick that used the provider."""

    _PROVIDER.append(Provider)
    return Provider


def install_shim():
    for name in ["streambuild", "streambuild.sensors", "streambuild.events", "streambuild.providers"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sensors = sys.modules["streambuild.sensors"]
    for item in [
        DefaultSensorStatus,
        EventSensorContext,
        PollingSensorContext,
        PollingSensorResult,
        SensorError,
        SensorRetryPolicy,
        SkipReason,
        StepPolicy,
        event_sensor,
        polling_sensor,
    ]:
        setattr(sensors, item.__name__, item)
    events = sys.modules["streambuild.events"]
    for item in [AuditCompleted, AuditTransition, ObservedCommand, RunCompleted, SensorEvent]:
        setattr(events, item.__name__, item)
    providers = sys.modules["streambuild.providers"]

    def provider_attribute(attribute):
        if attribute == "Provider":
            return provider_base()
        raise AttributeError(f"module 'streambuild.providers' has no attribute '{attribute}'")

    providers.__getattr__ = provider_attribute
    package = sys.modules["streambuild"]
    package.sensors, package.events, package.providers = sensors, events, providers


FILES = {}  # absolute path -> project-relative path
SENSORS = {}  # name -> (declaration, relative file)
PROVIDERS = {}  # name -> (class, relative file)


def send(payload):
    PROTOCOL_OUT.write(json.dumps(payload) + "\n")
    PROTOCOL_OUT.flush()


class LoadError(Exception):
    def __init__(self, message, file=None, line=None, kind="load"):
        super().__init__(message)
        self.payload = {"message": message, "file": file, "line": line, "kind": kind}


def location(error, file):
    """The innermost frame inside a project file (or the syntax error's line)."""
    line = None
    if isinstance(error, SyntaxError) and error.filename in FILES:
        file, line = FILES[error.filename], error.lineno
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename in FILES:
            file, line = FILES[frame.filename], frame.lineno
    return file, line


def import_file(module_name, path):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def ensure_package(name, directory):
    """A namespace package for `providers` (and its folders), so sensors import providers by
    the project-root path: `from providers.console import ConsoleNotifier`."""
    if name in sys.modules:
        return
    package = types.ModuleType(name)
    package.__path__ = [directory]
    sys.modules[name] = package
    parent, _, leaf = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], leaf, package)


def first_paragraph(doc):
    if not doc:
        return None
    text = inspect.cleandoc(doc).strip()
    return text.split("\n\n", 1)[0].replace("\n", " ").strip() or None


def load_providers(project_dir, files):
    for entry in files:
        path, relative = entry["path"], entry["relative"]
        FILES[path] = relative
        parts = relative[: -len(".py")].split("/")
        for depth in range(1, len(parts)):
            ensure_package(".".join(parts[:depth]), os.path.join(project_dir, *parts[:depth]))
        module_name = ".".join(parts)
        try:
            module = import_file(module_name, path)
        except Exception as error:  # noqa: BLE001 - any failure is the file's
            file, line = location(error, relative)
            raise LoadError(f"Failed to import provider file {relative}: {type(error).__name__}: {error}", file, line)
        base = _PROVIDER[0] if _PROVIDER else None
        if base is None:
            continue  # the file never imported streambuild.providers: it declares none
        for value in list(vars(module).values()):
            if not (inspect.isclass(value) and issubclass(value, base) and value is not base):
                continue
            if value.__module__ != module_name or inspect.isabstract(value):
                continue
            name = value.name()
            try:
                line = inspect.getsourcelines(value)[1]
            except (OSError, TypeError):
                line = None
            if not PROVIDER_NAME.match(name or ""):
                raise LoadError(
                    f"Provider name '{name}' in {relative} must be a lower snake_case identifier", relative, line
                )
            if name in PROVIDERS:
                raise LoadError(
                    f"Duplicate provider name '{name}' found in {PROVIDERS[name][1]} and {relative}",
                    relative,
                    line,
                    "collision",
                )
            if name in ("ctx", "context", "_ctx"):
                raise LoadError(
                    f"Provider name '{name}' in {relative} is reserved for the sensor context", relative, line
                )
            try:
                value()
            except Exception as error:  # noqa: BLE001 - pydantic's ValidationError and the like
                raise LoadError(
                    f"Provider '{name}' in {relative} has invalid settings:\n{settings_problems(error)}",
                    relative,
                    line,
                )
            PROVIDERS[name] = (value, relative, line)


def settings_problems(error):
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return f"{type(error).__name__}: {error}"
    lines = []
    for problem in errors():
        place = ".".join(str(part) for part in problem.get("loc", ())) or "(settings)"
        lines.append(f"{place}: {problem.get('msg')} [{problem.get('type')}]")
    return "\n".join(lines)


def injection(declaration, relative, line):
    """How the handler's parameters are filled: the context and providers by name."""
    parameters = inspect.signature(declaration.fn).parameters
    base = _PROVIDER[0] if _PROVIDER else None
    context = None
    providers = {}
    for parameter in parameters.values():
        annotation = parameter.annotation
        wants_provider = base is not None and inspect.isclass(annotation) and issubclass(annotation, base)
        if parameter.name in ("ctx", "context", "_ctx"):
            context = context or parameter.name
        elif parameter.name in PROVIDERS:
            cls = PROVIDERS[parameter.name][0]
            if wants_provider and not issubclass(cls, annotation):
                raise LoadError(
                    f"Sensor '{declaration.name}' parameter '{parameter.name}' is annotated {annotation.__name__} "
                    f"but provider '{parameter.name}' is {cls.__name__}. Import project providers using the "
                    "project-root providers package path, for example: from providers.my_provider import MyProvider",
                    relative,
                    line,
                )
            providers[parameter.name] = parameter.name
        elif wants_provider:
            raise LoadError(
                f"Provider parameter '{parameter.name}' requires provider '{parameter.name}', but it was not found",
                relative,
                line,
            )
        elif context is None and parameter.default is inspect.Parameter.empty and parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            context = parameter.name
        elif parameter.default is inspect.Parameter.empty and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            raise LoadError(
                f"Sensor '{declaration.name}' parameter '{parameter.name}' is neither its context nor a provider",
                relative,
                line,
            )
    return context, sorted(providers)


def load_sensors(files):
    for entry in files:
        path, relative = entry["path"], entry["relative"]
        FILES[path] = relative
        parts = relative[: -len(".py")].split("/")
        module_name = "streambuild_project_" + "_".join(parts)
        try:
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
            module = import_file(module_name, path)
        except LoadError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure is the file's
            file, line = location(error, relative)
            raise LoadError(f"Failed to load {relative}: {type(error).__name__}: {error}", file, line)
        for value in list(vars(module).values()):
            if not isinstance(value, SensorDeclaration):
                continue
            if getattr(value.fn, "__module__", None) != module_name:
                continue
            line = value.fn.__code__.co_firstlineno
            if value.name in SENSORS:
                raise LoadError(
                    f"Sensor name collision for '{value.name}' in '{SENSORS[value.name][1]}' and '{relative}'",
                    relative,
                    line,
                    "collision",
                )
            context, providers = injection(value, relative, line)
            fingerprint = hashlib.sha256(f"{value.name}\0{relative}\0{source}".encode()).hexdigest()
            SENSORS[value.name] = (value, relative, line, fingerprint, context, providers)


def describe_sensor(name):
    declaration, relative, line, fingerprint, _context, providers = SENSORS[name]
    options = declaration.options
    retry = options["retry_policy"]
    described = {
        "name": name,
        "kind": declaration.kind,
        "description": first_paragraph(declaration.__doc__),
        "file": relative,
        "line": line,
        "fingerprint": fingerprint,
        "default_status": str(options["default_status"]),
        "retry_policy": {"max_attempts": retry.max_attempts, "backoff_seconds": float(retry.backoff_seconds)},
        "timeout_seconds": options["timeout_seconds"],
        "providers": providers,
    }
    if declaration.kind == "event":
        described["event_type"] = options["event_type"]
        described["targets"] = options["targets"]
        described["triggers"] = options["triggers"]
        age = options["maximum_event_age_seconds"]
        described["maximum_event_age_seconds"] = None if age is None else float(age)
    else:
        described["minimum_interval_seconds"] = options["minimum_interval_seconds"]
    return described


def load(request):
    project_dir = request["project_dir"]
    if project_dir not in sys.path:
        sys.path.insert(0, project_dir)
    load_providers(project_dir, request.get("providers", []))
    load_sensors(request.get("sensors", []))
    return {
        "sensors": [describe_sensor(name) for name in sorted(SENSORS)],
        "providers": [
            {"name": name, "class": cls.__name__, "file": relative, "line": line}
            for name, (cls, relative, line) in sorted(PROVIDERS.items())
        ],
    }


def ask(message):
    """Sends a message in the middle of a request and waits for stb's answer: a step
    marker is durable once stb says so."""
    send(message)
    line = sys.stdin.readline()
    if not line:
        raise SensorError("stb closed the sensor worker's input")
    answer = json.loads(line)
    if not answer.get("ok"):
        raise SensorError(answer.get("error", {}).get("message", "stb refused a step marker"))
    return answer


class Steps:
    """`ctx.step(key, fn, policy)`: durable markers, so a retried event resumes instead of
    redoing. The markers recorded so far come with the request; new ones go to stb, which
    records each before the handler goes on."""

    def __init__(self, recorded):
        self.recorded = dict(recorded)

    def record(self, key, policy, status, attempt, result_json=None, error=None):
        marker = {"step_key": key, "policy": str(policy), "status": status, "attempt": attempt,
                  "result_json": result_json, "error_message": error}
        ask({"ask": {"step": marker}})
        self.recorded[key] = marker

    def __call__(self, key, fn, policy):
        previous = self.recorded.get(key)
        if previous and previous.get("status") == "succeeded":
            text = previous.get("result_json")
            return None if text is None else json.loads(text)
        attempt = (previous or {}).get("attempt", 0) + 1
        if policy == StepPolicy.AT_MOST_ONCE:
            if previous:
                raise SensorError(
                    f"Step '{key}' was already attempted under at-most-once policy and produced no memoized result"
                )
            self.record(key, policy, "started", attempt)
            try:
                value = fn()
                text = json.dumps(value, sort_keys=True)
            except Exception as error:
                self.record(key, policy, "failed", attempt, error=scrubbed(error))
                raise
            self.record(key, policy, "succeeded", attempt, result_json=text)
            return value
        value = fn()
        try:
            text = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError) as error:
            raise SensorError(f"Step '{key}' returned a value that is not JSON-serializable: {error}") from error
        self.record(key, policy, "succeeded", attempt, result_json=text)
        return value


CREDENTIALS_IN_URL = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")
QUERY_STRING = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s?#]*)\?[^\s#]*")


def scrubbed(error):
    """An exception as the ledger keeps it and the API shows it: a URL's credentials and
    query string (where webhook tokens live) are cut out."""
    text = f"{type(error).__name__}: {error}"
    text = CREDENTIALS_IN_URL.sub(r"\1***@", text)
    return QUERY_STRING.sub(r"\1?***", text)


def make_event(payload):
    fields = dict(payload)
    kind = fields.pop("kind")
    if kind == "AuditCompleted":
        fields["transition"] = AuditTransition(fields["transition"])
        fields["sample_column_names"] = tuple(fields.get("sample_column_names") or ())
        fields["sample_rows"] = tuple(tuple(row) for row in fields.get("sample_rows") or ())
        return AuditCompleted(**fields)
    fields["command"] = ObservedCommand(fields["command"])
    return RunCompleted(**fields)


def evaluate(request):
    """Runs one tick of a sensor; its outcome (a failure included) is the reply."""
    declaration, _relative, _line, _fingerprint, context_name, provider_names = SENSORS[request["sensor"]]
    if declaration.kind == "event":
        context = EventSensorContext(make_event(request["event"]), request["target"], Steps(request.get("steps") or {}))
    else:
        polling = request.get("polling") or {}
        context = PollingSensorContext(polling.get("cursor"), polling.get("last_success_at"), request["target"])
    opened = []
    try:
        arguments = {}
        for name in provider_names:
            provider = PROVIDERS[name][0]()
            provider.setup(context)
            opened.append(provider)
            arguments[name] = provider
        if context_name is not None:
            arguments[context_name] = context
        result = declaration.fn(**arguments)
    except Exception as error:  # noqa: BLE001 - a handler's failure is a failed tick
        outcome = {"status": "failed", "error": scrubbed(error)}
    else:
        if isinstance(result, SkipReason):
            outcome = {"status": "skipped", "skip_reason": result.reason}
        elif isinstance(result, PollingSensorResult):
            outcome = {"status": "succeeded", "cursor": result.cursor}
        else:
            outcome = {"status": "succeeded"}
    problems = []
    for provider in reversed(opened):
        try:
            provider.teardown()
        except Exception as error:  # noqa: BLE001 - gathered, reported with the tick
            problems.append(f"{type(provider).__name__}.teardown: {scrubbed(error)}")
    if problems and outcome["status"] != "failed":
        outcome = {"status": "failed", "error": "; ".join(problems)}
    return outcome


def leave_with_parent():
    """Ends the worker when the process that started it is gone: a `stb dev` that stopped
    while a handler still ran does not wait for it, and must not leave it behind."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main():
    install_shim()
    leave_with_parent()
    while True:
        raw = sys.stdin.readline()
        if not raw:
            break
        raw = raw.strip()
        if not raw:
            continue
        try:
            request = json.loads(raw)
            if request.get("op") == "load":
                send({"ok": True, **load(request)})
            elif request.get("op") == "evaluate":
                send({"ok": True, **evaluate(request)})
            else:
                send({"ok": False, "error": {"message": f"unknown op {request.get('op')!r}"}})
        except LoadError as error:
            send({"ok": False, "error": error.payload})
        except Exception as error:  # noqa: BLE001 - the worker must answer, never die
            send({"ok": False, "error": {"message": f"{type(error).__name__}: {error}"}})


if __name__ == "__main__":
    main()
