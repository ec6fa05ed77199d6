// The warm call's entry into a program (targets/cpu/entry.py): its arguments arrive as one
// record of 8-byte slots (filled by the call's binder, runtime/_binder.c), read here by type.
//
// Slots 0-3: the program's state, the check bits and two reserved slots; then the
// parameters' slots.
#ifndef SDFGSPARSE_ENTRY_H
#define SDFGSPARSE_ENTRY_H
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sdfgsparse_load.h"

namespace sdfgsparse {

class EntryRecord {
  public:
    explicit EntryRecord(const char* rec) : rec_(rec) {
        std::memcpy(&checks_, rec + 8, 8);
    }
    long long checks() const { return checks_; }
    void* state() const { return (void*)(std::uintptr_t)word(rec_); }

    // parameter i as T: a pointer from an address, an integer (or bool) from a signed 64-bit
    // value, a floating-point value from a double
    template <typename T>
    typename std::enable_if<std::is_pointer<T>::value, T>::type get(int i) const {
        return (T)(std::uintptr_t)word(rec_ + 32 + 8 * i);
    }
    template <typename T>
    typename std::enable_if<std::is_integral<T>::value, T>::type get(int i) const {
        return (T)(std::int64_t)word(rec_ + 32 + 8 * i);
    }
    template <typename T>
    typename std::enable_if<std::is_floating_point<T>::value, T>::type get(int i) const {
        double v;
        std::memcpy(&v, rec_ + 32 + 8 * i, 8);
        return (T)v;
    }

  private:
    static std::uint64_t word(const char* p) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
    }
    const char* rec_;
    long long checks_ = 0;
};

}  // namespace sdfgsparse

// The entry function NAME (entry.py writes its body between the two: the sparse arguments'
// structs filled from the record and checked where the check bits ask, returning the failing
// argument's number + 1), ending with CALL, the program's own call. The checks and the program
// run on as many threads as the machine can give now (sdfgsparse_load.h: LoadScope).
#define SDFGSPARSE_ENTRY_BEGIN(NAME)             \
    DACE_EXPORTED int NAME(const char* _rec) {   \
        const sdfgsparse::LoadScope _load;       \
        const sdfgsparse::EntryRecord _r(_rec); \
        const long long _checks = _r.checks();
#define SDFGSPARSE_ENTRY_END(...) \
    __VA_ARGS__;                  \
    return 0;                     \
    }
#endif
