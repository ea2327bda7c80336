"""One program + one machine -> a decomposition plan, recursively down to the leaves."""
from compiler.rules import Task, access_map, task_of
from compiler.plan import AxisSplit, NodePlan, Plan
from compiler.decompose import CompileError, compile_program
from compiler.verify import plan_stats, verify_plan
from compiler.listing import plan_json, plan_text
from compiler.execute import execute_plan

__all__ = ["Task", "access_map", "task_of", "AxisSplit", "NodePlan", "Plan",
           "CompileError", "compile_program", "plan_stats", "verify_plan", "plan_json", "plan_text",
           "execute_plan"]
