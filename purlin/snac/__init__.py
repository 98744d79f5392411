"""SNAC: Stage, Notify And Consume. The planner, the Schedule IR and its verifier."""
from purlin.snac.ir import (Copy, Notify, Program, PutPackets, Reduce, Ref, Schedule, Wait,
                            WaitPackets)
from purlin.snac.planner import plan
from purlin.snac.policy import Policy, codesign

__all__ = ["Copy", "Notify", "Policy", "Program", "PutPackets", "Reduce", "Ref", "Schedule",
           "Wait", "WaitPackets", "codesign", "plan"]
