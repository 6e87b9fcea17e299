#!/usr/bin/env python3
"""Generate proto/agent_v1.proto and proto/aiserver_v1.proto from the wire fact sheet.

The sheet (shared/protocol/wire-schema.md) lists every message as a field table with exact
numbers, types, labels and oneofs. Transcribing ~400 tables by hand invites silent numbering
mistakes, so this script does it mechanically. It is run by hand when the sheet changes; the
generated .proto files are committed and are the source of truth for the build.

Usage: python3 tools/gen_proto.py [path/to/wire-schema.md]
"""
import os
import re
import sys
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHEET = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "protocol", "wire-schema.md")

AISERVER = {"BidiRequestId", "BidiAppendRequest", "BidiAppendResponse", "BidiPollRequest",
            "BidiPollResponse", "ErrorDetails", "CustomErrorDetails", "ErrorButton", "PlanChoice",
            "ErrorAnalyticsMetadata"}
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float",
           "sint32", "sint64", "fixed32", "fixed64"}
IDENT = re.compile(r"^[A-Z][A-Za-z0-9_]*(\.[A-Z][A-Za-z0-9_]*)?$")


class Msg:
    def __init__(self, name):
        self.name = name
        self.fields = []        # (name, number, type, label, oneof)
        self.reserved = []
        self.extra = []         # verbatim extra lines (nested enums rendered later)


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def clean_type(t):
    """Turn the sheet's type cell into a proto type string."""
    t = re.sub(r"\s*\((msg|enum), not expanded\)", "", t)
    t = re.sub(r"\s*\(n/e\)", "", t)
    m = re.match(r"^map<\s*(\w+)\s*,\s*(.+)>$", t)
    if m:
        return "map<%s, %s>" % (m.group(1), clean_type(m.group(2)))
    return t.replace("`", "").strip()


def main():
    lines = open(SHEET, encoding="utf-8").read().split("\n")
    messages = OrderedDict()
    enums = OrderedDict()        # full name -> [(value, number)]
    opaque = OrderedDict()       # name -> 'message' | 'enum' (Appendix A)
    toolcall_wrappers = []       # (wrapper, args, result, other)
    i = 0
    current = None               # ('msg', name) or ('enum', name)
    in_appendix = False
    while i < len(lines):
        line = lines[i]
        if line.startswith("## Appendix A"):
            in_appendix = True
        h = re.match(r"^### (enum )?(\S+)\s*$", line)
        if h and not in_appendix:
            name = h.group(2)
            current = ("enum" if h.group(1) else "msg", name) if IDENT.match(name) else None
            if current and current[0] == "msg" and name not in messages:
                messages[name] = Msg(name)
            if current and current[0] == "enum":
                enums.setdefault(name, [])
        ne = re.match(r"^Nested enum `([A-Za-z0-9_.]+)`:", line)
        if ne:
            current = ("enum", ne.group(1))
            enums.setdefault(ne.group(1), [])
        if line.startswith("| ") and current is not None and not in_appendix:
            c = cells(line)
            if current[0] == "msg" and len(c) == 5 and re.match(r"^\d+$", c[1]):
                name, num, typ, label = c[0], int(c[1]), clean_type(c[2]), c[3]
                oneof = None
                m = re.match(r"^oneof `(\w+)`$", label)
                if m:
                    oneof, label = m.group(1), "oneof"
                messages[current[1]].fields.append((name, num, typ, label, oneof))
            elif current[0] == "msg" and len(c) == 6 and re.match(r"^\d+$", c[1]) and current[1] == "ToolCall":
                messages["ToolCall"].fields.append((c[0], int(c[1]), clean_type(c[2]), "oneof", "tool"))
                toolcall_wrappers.append((clean_type(c[2]), clean_type(c[3]), clean_type(c[4]), c[5]))
            elif current[0] == "enum" and len(c) == 2 and re.match(r"^-?\d+$", c[1]):
                enums[current[1]].append((c[0], int(c[1])))
        if line.startswith("Numbers not used") and current and current[0] == "msg":
            nums = re.findall(r"\d+", line.split(":", 1)[1])
            messages[current[1]].reserved.extend(int(n) for n in nums)
        if in_appendix and line.startswith("| `"):
            c = cells(line)
            opaque[c[0].strip("`")] = c[1]
        i += 1

    # Newer builds add the binary form of the payload (sheet §2, "Newer builds add one field").
    messages["BidiAppendRequest"].fields.append(("data_binary", 4, "bytes", "singular", None))

    # ToolCall wrappers that have no table of their own get args = 1, result = 2 (+ extras).
    for wrapper, args, result, other in toolcall_wrappers:
        if wrapper in messages and messages[wrapper].fields:
            continue
        msg = messages.setdefault(wrapper, Msg(wrapper))
        if args != "—":
            msg.fields.append(("args", 1, args, "singular", None))
        if result != "—":
            msg.fields.append(("result", 2, result, "singular", None))
        if other != "—":
            for part in other.split(";"):
                m = re.match(r"^\s*(optional\s+)?(\w+)\s+(\w+)\s*=\s*(\d+)\s*$", part)
                assert m, part
                msg.fields.append((m.group(3), int(m.group(4)), m.group(2),
                                   "optional" if m.group(1) else "singular", None))
        msg.fields.sort(key=lambda f: f[1])

    # Drop headings that were not messages (no table, not declared empty).
    empties = set()
    for idx, line in enumerate(lines):
        if "*(no fields — empty message)*" in line:
            for back in range(idx, 0, -1):
                h = re.match(r"^### (\S+)\s*$", lines[back])
                if h:
                    empties.add(h.group(1))
                    break
    for name in list(messages):
        if not messages[name].fields and name not in empties and name not in dict(toolcall_wrappers):
            del messages[name]

    # Opaque (Appendix A) types and any other referenced-but-undefined type become empty.
    for name, kind in opaque.items():
        if kind == "enum":
            enums.setdefault(name, [])
        elif name not in messages:
            messages[name] = Msg(name)
    known = set(messages) | set(enums)
    for msg in list(messages.values()):
        for f in msg.fields:
            for t in re.findall(r"[A-Za-z][A-Za-z0-9_.]*", f[2]):
                if t in SCALARS or t == "map" or t.startswith("google.") or t in known:
                    continue
                if "." not in t and (msg.name + "." + t) in known:
                    continue
                sys.stderr.write("undefined type %s (in %s); declared empty\n" % (t, msg.name))
                messages[t] = Msg(t)
                known.add(t)

    add_newer_build_fields(messages)
    emit(messages, enums, AISERVER, "aiserver.v1", "aiserver_v1.proto", imports=[])
    emit(messages, enums, set(messages) | set(enums), "agent.v1", "agent_v1.proto",
         imports=["google/protobuf/struct.proto"], exclude=AISERVER)


def add_newer_build_fields(messages):
    """Fields of newer Cursor builds that the sheet's (older) source file lacks.

    Only numbers that several independent public sources agree on are added: the seed lists these
    actions without numbers; a generated Connect-ES module, a descriptor dump and a protocol
    write-up all give goal_continuation_action = 18 and inject_context_action = 19, and one client
    declares InjectContextAction{injection_id = 1, expected_run_id = 2, system_context = 4}.
    TurnEndedUpdate.reasoning_tokens = 5 is in the senpi/omp proto and the write-up;
    TextDeltaUpdate.is_server_notice = 2 is named by the seed and numbered by the write-up.
    Nothing whose number is uncertain is added (e.g. the user_context payload, or the fields of
    SubscriptionNotificationAction).
    """
    action = messages["ConversationAction"]
    action.fields.append(("goal_continuation_action", 18, "GoalContinuationAction", "oneof", "action"))
    action.fields.append(("inject_context_action", 19, "InjectContextAction", "oneof", "action"))
    messages["GoalContinuationAction"] = Msg("GoalContinuationAction")
    inject = Msg("InjectContextAction")
    inject.fields = [
        ("injection_id", 1, "string", "singular", None),
        ("expected_run_id", 2, "string", "singular", None),
        ("system_context", 4, "SystemContextInjection", "oneof", "payload"),
    ]
    messages["InjectContextAction"] = inject
    system = Msg("SystemContextInjection")
    system.fields = [("producer", 1, "string", "singular", None), ("content", 2, "string", "singular", None)]
    messages["SystemContextInjection"] = system
    messages["TurnEndedUpdate"].fields.append(("reasoning_tokens", 5, "int64", "optional", None))
    # The seed (§16.1) names `is_server_notice` on text_delta; the write-up gives it number 2.
    messages["TextDeltaUpdate"].fields.append(("is_server_notice", 2, "bool", "singular", None))


def enum_lines(name, values, indent):
    short = name.split(".")[-1]
    if not values:
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", short).upper()
        values = [(prefix + "_UNSPECIFIED", 0)]
        note = "  // opaque: values not in the sheet; unknown values decode as plain numbers"
    else:
        note = ""
    out = [indent + "enum %s {%s" % (short, note)]
    if not any(n == 0 for _, n in values):
        values = [(re.sub(r"(?<!^)(?=[A-Z])", "_", short).upper() + "_UNSPECIFIED", 0)] + values
    values = sorted(values, key=lambda v: (v[1] != 0,))
    for v, n in values:
        out.append(indent + "  %s = %d;" % (v, n))
    out.append(indent + "}")
    return out


def message_lines(msg, nested_msgs, nested_enums, indent, enums, messages):
    out = [indent + "message %s {" % msg.name.split(".")[-1]]
    for en in nested_enums:
        out += enum_lines(en, enums[en], indent + "  ")
    for nm in nested_msgs:
        out += message_lines(messages[nm], [], [e for e in enums if e.startswith(nm + ".")], indent + "  ", enums, messages)
    emitted_oneofs = set()
    for name, num, typ, label, oneof in msg.fields:
        if oneof:
            if oneof in emitted_oneofs:
                continue
            emitted_oneofs.add(oneof)
            out.append(indent + "  oneof %s {" % oneof)
            for n2, num2, t2, _, o2 in msg.fields:
                if o2 == oneof:
                    out.append(indent + "    %s %s = %d;" % (t2, n2, num2))
            out.append(indent + "  }")
        elif label == "map" or typ.startswith("map<"):
            out.append(indent + "  %s %s = %d;" % (typ, name, num))
        elif label in ("optional", "repeated"):
            out.append(indent + "  %s %s %s = %d;" % (label, typ, name, num))
        else:
            out.append(indent + "  %s %s = %d;" % (typ, name, num))
    used = {f[1] for f in msg.fields}
    res = sorted(n for n in set(msg.reserved) if n not in used)
    if res:
        out.append(indent + "  reserved %s;" % ", ".join(map(str, res)))
    out.append(indent + "}")
    return out


def emit(messages, enums, include, package, filename, imports, exclude=()):
    out = ["// GENERATED by tools/gen_proto.py from shared/protocol/wire-schema.md. Do not edit by hand:",
           "// field numbers, types, labels and oneofs are transcribed mechanically from the fact sheet.",
           "// Types the sheet lists only in Appendix A are declared empty (their fields decode as unknown).",
           'syntax = "proto3";', "", "package %s;" % package, ""]
    for imp in imports:
        out.append('import "%s";' % imp)
    if imports:
        out.append("")
    def wanted(name):
        top = name.split(".")[0]
        return top in include and top not in exclude
    for name, values in enums.items():
        if "." not in name and wanted(name):
            out += enum_lines(name, values, "")
            out.append("")
    for name, msg in messages.items():
        if "." in name or not wanted(name):
            continue
        nested_msgs = [m for m in messages if m.startswith(name + ".") and m.count(".") == 1]
        nested_enums = [e for e in enums if e.startswith(name + ".") and e.count(".") == 1]
        out += message_lines(msg, nested_msgs, nested_enums, "", enums, messages)
        out.append("")
    path = os.path.join(ROOT, "proto", filename)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out).rstrip() + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
