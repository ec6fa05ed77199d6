#!/bin/bash
# Usage: build_sim.sh <progname> <driver.cpp>   (program folder: work/<progname>/prog)
set -e
cd /tmp/fpga_probe
. ./flags.sh
P=$1; DRV=$2; PD=work/$P/prog; O=obj/$P; mkdir -p $O
COMMON="-std=c++17 -O1 -g -pthread $INC -DDACE_XILINX -DHLSLIB_SIMULATE_OPENCL -DCL_TARGET_OPENCL_VERSION=120"
HOST="$COMMON -include xcl_ext_stub.h -DDACE_BINARY_DIR=\"/tmp/fpga_probe/$O\""
for f in $PD/src/xilinx/device/*.cpp; do
  g++ $COMMON -DDACE_XILINX_DEVICE_CODE -c $f -o $O/dev_$(basename $f .cpp).o
done
g++ $HOST -c $PD/src/xilinx/host/$P.cpp -o $O/host.o
g++ $HOST -c $PD/src/cpu/$P.cpp -o $O/frame.o
g++ $HOST -I$PD/include -c $DRV -o $O/drv.o
g++ $COMMON -c stubs/cl_stubs.cpp -o $O/cl_stubs.o
g++ -pthread $O/*.o -o $O/run_$P
echo built $O/run_$P
