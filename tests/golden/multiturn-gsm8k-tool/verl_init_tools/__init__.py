"""Tools for verl's tool agent loop, written by verl-init 0.1.0 for verl 0.9.1.

tool_config.yaml (rollout.multi_turn.tool_config_path) names each tool's class; verl's tool registry imports it
in every agent-loop worker, where this bundle folder is on sys.path (run.sh starts verl here; a Ray job's
working_dir is this folder).
"""
