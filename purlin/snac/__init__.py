"""SNAC: Stage, Notify And Consume. The planner, the Schedule IR and its verifier."""
from purlin.snac.ir import (Copy, Fan, Notify, Program, PutPackets, Reduce, Ref, Schedule, Wait,
                            WaitPackets)
from purlin.snac.planner import check_limits, plan
from purlin.snac.policy import Policy, codesign

__all__ = ["check_limits", "Copy", "Notify", "Policy", "Program", "PutPackets", "Reduce", "Ref", "Fan", "Schedule",
           "Wait", "WaitPackets", "codesign", "plan"]
