from __future__ import annotations

from aiflows.base_flows import CircularFlow


class ControllerExecutor(CircularFlow):
    """Controller -> Executor until the controller says ``finish``: aiflows' CircularFlow, message keeping as it
    comes (each output message carries a copy of its flow's history; every message is kept)."""

    @CircularFlow.input_msg_payload_builder
    def prepare_controller_input(self, data_dict, dst_flow):
        return {"goal": data_dict["goal"], "observation": data_dict.get("observation")}

    @CircularFlow.output_msg_payload_processor
    def detect_finish_or_continue(self, output_payload, src_flow):
        if output_payload["command"] == "finish":
            return {"EARLY_EXIT": True, "summary": output_payload["command_args"].get("summary", "")}
        return output_payload
