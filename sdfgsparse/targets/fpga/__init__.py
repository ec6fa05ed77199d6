"""The FPGA target (Xilinx, through DaCe 1.0.2's FPGA code generator).

``ss.compile(sdfg, target='fpga')`` / ``ss.optimize(prog, target='fpga')`` lower a sparse
program for the FPGA (:mod:`.lower`: CSR products as streaming dataflow designs,
:mod:`.streaming`; the other operations as their portable expansions; flat sparse
arguments) and, with no FPGA attached, run it as a C-simulation of the generated HLS code
(:mod:`.csim`, built with g++; :mod:`.toolchain` says what it needs).
"""
from sdfgsparse.targets.fpga.lower import flat_arguments, is_lowered, to_fpga
from sdfgsparse.targets.fpga.streaming import Design, design_of

__all__ = ['to_fpga', 'is_lowered', 'flat_arguments', 'Design', 'design_of']
