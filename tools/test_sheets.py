"""Tests of the sheet merge: conflicts stop it, wire-compatible differences are resolved as
WIRE_COMPATIBLE says, additions land with their numbers. Run: python3 tools/test_sheets.py
(__tests__/generated.test.mjs runs it too)."""
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import proto_text  # noqa: E402
import merge_addendum  # noqa: E402
from schema_model import Enum, Field, Message, Schema, SchemaError  # noqa: E402


def older_schema():
    schema = Schema()
    run = schema.messages["agent.v1.AgentRunRequest"] = Message("agent.v1.AgentRunRequest")
    run.fields = [Field("conversation_id", 5, "string", "optional"), Field("harness", 13, "string", "optional")]
    run.reserved = [14, 15]
    schema.messages["agent.v1.Opaque"] = Message("agent.v1.Opaque", "no source lists its fields")
    mode = schema.enums["agent.v1.AgentMode"] = Enum("agent.v1.AgentMode")
    mode.values = [("AGENT_MODE_UNSPECIFIED", 0), ("AGENT_MODE_AGENT", 1)]
    return schema


def addendum(text):
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        return merge_addendum.read(f.name)
    finally:
        os.unlink(f.name)


def table(name, status, rows):
    lines = ["### " + name, "", status, "", "| field | # | type | label / oneof | status |", "|---|---|---|---|---|"]
    return "\n".join(lines + ["| %s |" % " | ".join(r) for r in rows]) + "\n\n"


RUN_ROWS = [["conversation_id", "5", "string", "optional", ""]]
PARTLY = "In proto/ already; the rows marked **new** are missing there (the others are listed for reference)."


class MergeTest(unittest.TestCase):
    def merge(self, text):
        schema, notes = older_schema(), []
        merge_addendum.merge(schema, addendum("## Messages\n\n" + text), notes.append)
        return schema, notes

    def test_new_fields_messages_and_nested_types_are_added_with_their_numbers(self):
        text = table("AgentRunRequest", PARTLY, RUN_ROWS + [["run_id", "25", "string", "optional", "**new**"],
                                                          ["box", "26", "`Box.Inner`", "oneof `extra`", "**new**"]])
        text += table("Box", "Not in proto/ yet.", [["inner", "1", "`Box.Inner`", "repeated", ""]])
        text += table("Box.Inner", "Not in proto/ yet.", [["items", "1", "map<string, `Opaque`>", "map", ""]])
        text += table("Opaque", "Declared empty in proto/ today; these are its fields.", [["x", "1", "int64", "singular", ""]])
        schema, notes = self.merge(text)
        run = schema.messages["agent.v1.AgentRunRequest"]
        self.assertEqual(run.field_by_number(25).row(), ["run_id", 25, "string", "optional", None])
        self.assertEqual(run.field_by_number(26).row(), ["box", 26, "agent.v1.Box.Inner", "oneof", "extra"])
        self.assertEqual(schema.messages["agent.v1.Box.Inner"].fields[0].type, "map<string, agent.v1.Opaque>")
        self.assertIsNone(schema.messages["agent.v1.Opaque"].note, "filled: no longer declared empty")
        self.assertEqual(notes, [])
        text = proto_text.render(schema)["agent_v1.proto"]
        self.assertIn("  message Inner {\n    map<string, Opaque> items = 1;\n  }", text)
        self.assertIn("  repeated Box.Inner inner = 1;", text)

    def test_a_field_both_define_differently_stops_the_merge(self):
        for row, what in [(["conversation_uuid", "5", "string", "optional", ""], "conversation_uuid"),
                          (["conversation_id", "5", "bytes", "optional", ""], "bytes"),
                          (["conversation_id", "5", "string", "singular", ""], "singular"),
                          (["conversation_id", "5", "string", "oneof `x`", ""], "oneof x")]:
            with self.assertRaises(SchemaError) as caught:
                self.merge(table("AgentRunRequest", PARTLY, [row]))
            message = str(caught.exception)
            self.assertIn("agent.v1.AgentRunRequest field 5", message)
            self.assertIn(what, message)
            self.assertIn("WIRE_COMPATIBLE", message)

    def test_the_same_name_under_another_number_stops_the_merge(self):
        with self.assertRaises(SchemaError) as caught:
            self.merge(table("AgentRunRequest", PARTLY, [["conversation_id", "6", "string", "optional", "**new**"]]))
        self.assertIn("conversation_id = 6", str(caught.exception))

    def test_a_listed_wire_compatible_difference_is_resolved_as_documented(self):
        schema, _ = self.merge(table("AgentRunRequest", PARTLY, [["harness", "13", "bytes", "optional", ""]]))
        self.assertEqual(schema.messages["agent.v1.AgentRunRequest"].field_by_number(13).type, "string")
        # Only that difference: a renamed harness still stops it.
        with self.assertRaises(SchemaError):
            self.merge(table("AgentRunRequest", PARTLY, [["harness_id", "13", "bytes", "optional", ""]]))

    def test_an_undefined_type_or_parent_stops_the_merge(self):
        with self.assertRaises(SchemaError) as caught:
            self.merge(table("AgentRunRequest", PARTLY, [["x", "30", "`Nowhere`", "optional", "**new**"]]))
        self.assertIn("Nowhere", str(caught.exception))
        with self.assertRaises(SchemaError) as caught:
            self.merge(table("Missing.Child", "Not in proto/ yet.", []))
        self.assertIn("agent.v1.Missing", str(caught.exception))

    def test_enum_values_are_added_and_conflicts_stop_the_merge(self):
        head = "## Enums\n\n### enum AgentMode\n\nValues missing from proto/:\n\n| value | # |\n|---|---|\n"
        schema, notes = older_schema(), []
        merge_addendum.merge(schema, addendum(head + "| AGENT_MODE_CUSTOM | 8 |\n"), notes.append)
        self.assertEqual(schema.enums["agent.v1.AgentMode"].values[-1], ("AGENT_MODE_CUSTOM", 8))
        with self.assertRaises(SchemaError) as caught:
            merge_addendum.merge(older_schema(), addendum(head + "| AGENT_MODE_AUTO | 1 |\n"), notes.append)
        self.assertIn("AGENT_MODE_AUTO = 1", str(caught.exception))

    def test_claims_about_todays_proto_that_do_not_hold_are_noted(self):
        _, notes = self.merge(table("AgentRunRequest", PARTLY, [["conversation_id", "5", "string", "optional", "**new**"]]))
        self.assertEqual(len(notes), 1)
        self.assertIn("marked new", notes[0])


if __name__ == "__main__":
    unittest.main()
