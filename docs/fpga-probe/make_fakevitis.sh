#!/bin/bash
# Recreate everything needed to build/run DaCe 1.0.2 Xilinx code in hlslib simulation mode WITHOUT Vitis.
# Usage: make_fakevitis.sh [DEST]   (default /tmp/fpga_probe/fv2). Needs: pip (any python), apt-get download, g++.
set -euo pipefail
DEST=${1:-/tmp/fpga_probe/fv2}; HERE=/tmp/fpga_probe
PY=${PY:-/work/main/.venv/bin/python}
mkdir -p $DEST/dl $DEST/sysroot && cd $DEST/dl
# 1) Xilinx arbitrary-precision headers (Apache-2.0) from the hls4ml wheel
[ -f hls4ml-*.whl ] || $PY -m pip download --no-deps hls4ml==1.3.0 -d . -q
unzip -q -o hls4ml-*.whl 'hls4ml/templates/vivado/ap_types/*' -d $DEST/dl/x
# 2) Khronos OpenCL C + C++ headers (Apache-2.0), unpacked, not installed
#    (alternative: apt-get install -y opencl-c-headers opencl-clhpp-headers)
apt-get download opencl-clhpp-headers opencl-c-headers >/dev/null 2>&1
for d in opencl-*.deb; do dpkg -x $d $DEST/sysroot; done
SYS=$DEST/sysroot/usr
# 3) fake Vitis 2022.1 tree
V=$DEST/Vitis/2022.1; mkdir -p $V/bin $V/include/CL $V/lnx64/tools/fpo_v7_1 $DEST/xrt/lib $DEST/xrt/include/CL
for t in v++ platforminfo vitis_hls vivado; do
  printf '#!/bin/sh\necho "%s: fake stub, Vitis not installed" >&2\nexit 1\n' $t > $V/bin/$t; chmod +x $V/bin/$t; done
AP=$DEST/dl/x/hls4ml/templates/vivado/ap_types
cp -r $AP/ap_*.h $AP/etc $AP/utils $V/include/
echo '#error "hls_stream.h: synthesis only (fake Vitis)"' > $V/include/hls_stream.h
cp $HERE/stubs/xcl_ext_stub.h $V/include/CL/xcl_ext_stub.h
printf '#pragma once\n#include_next <CL/cl_ext.h>\n#include "xcl_ext_stub.h"\n' > $V/include/CL/cl_ext.h
cp $V/include/CL/cl_ext.h $DEST/xrt/include/CL/cl_ext.h; cp $HERE/stubs/xcl_ext_stub.h $DEST/xrt/include/CL/
for l in libIp_floating_point_v7_1_bitacc_cmodel libgmp libmpfr; do
  g++ -shared -fPIC -x c /dev/null -o $V/lnx64/tools/fpo_v7_1/$l.so; done
g++ -shared -fPIC -O1 -I$SYS/include -DCL_TARGET_OPENCL_VERSION=120 $HERE/stubs/cl_stubs.cpp -o $DEST/xrt/lib/libxilinxopencl.so
echo "OK. Use with DaCe:"
echo "  export XILINX_XRT=$DEST/xrt"
echo "  Config: compiler.xilinx.path=$V  compiler.xilinx.mode=simulation"
echo "  compiler.extra_cmake_args='-DOpenCL_INCLUDE_DIR=$SYS/include -DOpenCL_LIBRARY=$DEST/xrt/lib/libxilinxopencl.so'"
