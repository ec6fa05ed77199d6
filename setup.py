"""The package's one compiled part: the warm call of compiled programs (runtime/_binder.c,
the CPython C API); everything else is in setup.cfg."""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension('sdfgsparse.runtime._binder', sources=['sdfgsparse/runtime/_binder.c'],
              extra_compile_args=['-O2', '-std=c11', '-Wall', '-Wno-missing-field-initializers'])
])
