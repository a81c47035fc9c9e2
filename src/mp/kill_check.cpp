// Reads the call-site tables the C++ personality routine reads (the LSDA of
// each frame, in the format GCC and Clang emit on DWARF-unwinding targets),
// the way its search phase does, without throwing anything.
#include "mp/kill_check.hpp"

#include <link.h>
#include <unwind.h>

#include <cstdint>
#include <cstring>

namespace pto::mp::detail {

namespace {

// DWARF exception-header pointer encodings.
constexpr unsigned char pe_omit = 0xff;
constexpr unsigned char pe_absptr = 0x00;
constexpr unsigned char pe_uleb128 = 0x01;
constexpr unsigned char pe_udata2 = 0x02;
constexpr unsigned char pe_udata4 = 0x03;
constexpr unsigned char pe_udata8 = 0x04;
constexpr unsigned char pe_sleb128 = 0x09;
constexpr unsigned char pe_sdata2 = 0x0a;
constexpr unsigned char pe_sdata4 = 0x0b;
constexpr unsigned char pe_sdata8 = 0x0c;
constexpr unsigned char pe_pcrel = 0x10;
constexpr unsigned char pe_indirect = 0x80;

class Reader {
public:
    explicit Reader(const unsigned char* p) : p_(p) {}

    const unsigned char* position() const { return p_; }

    unsigned char byte() { return *p_++; }

    std::uintptr_t uleb128()
    {
        unsigned shift = 0;
        unsigned char last = 0;
        return leb128(shift, last);
    }

    std::intptr_t sleb128()
    {
        unsigned shift = 0;
        unsigned char last = 0;
        std::uintptr_t value = leb128(shift, last);
        if (shift < 8 * sizeof value && (last & 0x40) != 0) value |= ~std::uintptr_t{0} << shift;
        return static_cast<std::intptr_t>(value);
    }

    // false for an encoding this reader does not know.
    bool pointer(unsigned char encoding, std::uintptr_t& out)
    {
        if (encoding == pe_omit) return false;
        const auto field = reinterpret_cast<std::uintptr_t>(p_);
        std::uintptr_t value = 0;
        switch (encoding & 0x0f) {
        case pe_absptr: value = fixed<std::uintptr_t>(); break;
        case pe_uleb128: value = uleb128(); break;
        case pe_sleb128: value = static_cast<std::uintptr_t>(sleb128()); break;
        case pe_udata2: value = fixed<std::uint16_t>(); break;
        case pe_udata4: value = fixed<std::uint32_t>(); break;
        case pe_udata8: value = static_cast<std::uintptr_t>(fixed<std::uint64_t>()); break;
        case pe_sdata2: value = static_cast<std::uintptr_t>(fixed<std::int16_t>()); break;
        case pe_sdata4: value = static_cast<std::uintptr_t>(fixed<std::int32_t>()); break;
        case pe_sdata8: value = static_cast<std::uintptr_t>(fixed<std::int64_t>()); break;
        default: return false;
        }
        // Zero stays zero whatever the encoding: a catch (...) has no type.
        if (value != 0) {
            switch (encoding & 0x70) {
            case 0: break;
            case pe_pcrel: value += field; break;
            default: return false;  // text- and data-relative bases never occur in an LSDA here
            }
            if ((encoding & pe_indirect) != 0) std::memcpy(&value, reinterpret_cast<void*>(value), sizeof value);
        }
        out = value;
        return true;
    }

private:
    // The bits of a LEB128 number; `shift` is how many, `last` its last byte.
    std::uintptr_t leb128(unsigned& shift, unsigned char& last)
    {
        std::uintptr_t value = 0;
        do {
            last = *p_++;
            value |= static_cast<std::uintptr_t>(last & 0x7f) << shift;
            shift += 7;
        } while ((last & 0x80) != 0);
        return value;
    }

    template <class T>
    T fixed()
    {
        T value;
        std::memcpy(&value, p_, sizeof value);
        p_ += sizeof value;
        return value;
    }

    const unsigned char* p_;
};

std::size_t encoded_size(unsigned char encoding)
{
    switch (encoding & 0x07) {
    case pe_absptr: return sizeof(void*);
    case pe_udata2: return 2;
    case pe_udata4: return 4;
    case pe_udata8: return 8;
    }
    return 0;
}

enum class Verdict { go_on, caught, terminates, unknown };

#if defined(__x86_64__)
// Whether [address, address + size) lies inside one executable segment of a
// loaded object. dladdr would not do: it answers for any address between an
// object's first and last byte, data and the gaps between segments included,
// and a 0xe8 byte inside another instruction decodes to such a target (ASan
// caught the read landing in a global's redzone).
bool in_code(std::uintptr_t address, std::size_t size)
{
    struct Range {
        std::uintptr_t first, last;
        bool inside = false;
    } range{address, address + size - 1};
    if (range.last < range.first) return false;  // wrapped past the top
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* arg) {
            auto& r = *static_cast<Range*>(arg);
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& segment = info->dlpi_phdr[i];
                if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0) continue;
                const std::uintptr_t start = info->dlpi_addr + segment.p_vaddr;
                if (r.first >= start && r.last < start + segment.p_memsz) {
                    r.inside = true;
                    return 1;  // found: stop the walk
                }
            }
            return 0;
        },
        &range);
    return range.inside;
}
#endif

// Clang gives a noexcept function a catch-all landing pad that runs the
// frame's destructors and calls __clang_call_terminate (push; call
// __cxa_begin_catch; call std::terminate): a catch (...) in the tables, the
// end of the program in fact. That helper is hidden in every object that
// uses it, so it is known by its shape, as the target of a `call rel32`
// among the pad's first bytes, reached before any call to the
// __cxa_begin_catch it calls itself, which a real handler's pad makes first
// after its destructors. x86-64 only; elsewhere such a pad reads as a handler.
bool is_terminate_pad(std::uintptr_t pad)
{
#if defined(__x86_64__)
    constexpr std::size_t window = 96;  // a pad's destructor calls, then the call
    if (!in_code(pad, window + 5)) return false;
    const auto* code = reinterpret_cast<const unsigned char*>(pad);
    constexpr unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    const auto call_target = [](const unsigned char* call) {
        std::int32_t displacement = 0;
        std::memcpy(&displacement, call + 1, sizeof displacement);
        return reinterpret_cast<std::uintptr_t>(call) + 5 +
               static_cast<std::uintptr_t>(static_cast<std::intptr_t>(displacement));
    };
    std::uintptr_t earlier[window];  // the targets of the calls before
    std::size_t calls = 0;
    for (std::size_t i = 0; i < window; ++i) {
        if (code[i] != 0xe8) continue;  // call rel32
        const std::uintptr_t target = call_target(code + i);
        if (!in_code(target, 16)) continue;
        const auto* callee = reinterpret_cast<const unsigned char*>(target);
        if (std::memcmp(callee, endbr64, sizeof endbr64) == 0) callee += sizeof endbr64;
        // push %rax; call rel32; call rel32
        if (callee[0] == 0x50 && callee[1] == 0xe8 && callee[6] == 0xe8) {
            const std::uintptr_t begin_catch = call_target(callee + 1);
            for (std::size_t c = 0; c < calls; ++c)
                if (earlier[c] == begin_catch) return false;
            return true;
        }
        earlier[calls++] = target;
    }
#else
    static_cast<void>(pad);
#endif
    return false;
}

// Whether a handler of `type` takes an exception `thrown` at `object`.
bool catches(const std::type_info& type, const std::type_info& thrown, void* object)
{
    if (&type == &thrown || type == thrown) return true;
#if defined(__GLIBCXX__)
    // Base classes, as the personality routine matches them.
    void* adjusted = object;
    return type.__do_catch(&thrown, &adjusted, 1);
#else
    static_cast<void>(object);
    return false;
#endif
}

// What a throw of `thrown` does on reaching this frame at `ip`.
Verdict frame_verdict(const unsigned char* lsda, std::uintptr_t region_start, std::uintptr_t ip,
                      const std::type_info& thrown, void* object)
{
    Reader r(lsda);
    const unsigned char lpstart_encoding = r.byte();
    std::uintptr_t lpstart = region_start;
    if (lpstart_encoding != pe_omit && !r.pointer(lpstart_encoding, lpstart)) return Verdict::unknown;
    const unsigned char ttype_encoding = r.byte();
    const unsigned char* ttype_base = nullptr;
    if (ttype_encoding != pe_omit) {
        const std::uintptr_t offset = r.uleb128();
        ttype_base = r.position() + offset;
    }
    const unsigned char call_site_encoding = r.byte();
    const std::uintptr_t table_length = r.uleb128();
    const unsigned char* table_end = r.position() + table_length;
    const unsigned char* actions = table_end;
    while (r.position() < table_end) {
        std::uintptr_t start = 0, length = 0, landing_pad = 0;
        if (!r.pointer(call_site_encoding, start) || !r.pointer(call_site_encoding, length) ||
            !r.pointer(call_site_encoding, landing_pad))
            return Verdict::unknown;
        const std::uintptr_t action = r.uleb128();
        if (ip < region_start + start) break;  // sorted: ip is in no record
        if (ip >= region_start + start + length) continue;
        if (landing_pad == 0 || action == 0) return Verdict::go_on;  // nothing, or only destructors
        Reader a(actions + action - 1);
        for (;;) {
            const std::intptr_t filter = a.sleb128();
            const unsigned char* next = a.position();
            const std::intptr_t displacement = a.sleb128();
            if (filter > 0) {
                const std::size_t size = encoded_size(ttype_encoding);
                if (ttype_base == nullptr || size == 0) return Verdict::unknown;
                Reader t(ttype_base - static_cast<std::uintptr_t>(filter) * size);
                std::uintptr_t type = 0;
                if (!t.pointer(ttype_encoding, type)) return Verdict::unknown;
                if (type == 0) return is_terminate_pad(lpstart + landing_pad) ? Verdict::terminates : Verdict::caught;
                if (catches(*reinterpret_cast<const std::type_info*>(type), thrown, object)) return Verdict::caught;
            } else if (filter < 0) {
                // An exception specification: noexcept, or a throw(...) list
                // that cannot name the kill's private type.
                return Verdict::terminates;
            }
            if (displacement == 0) return Verdict::go_on;
            a = Reader(next + displacement);
        }
    }
    // A call outside every record of a function with a table: the
    // personality routine calls std::terminate there.
    return Verdict::terminates;
}

struct Walk {
    const std::type_info* thrown;
    void* object;
    Verdict verdict = Verdict::unknown;
};

_Unwind_Reason_Code visit(_Unwind_Context* context, void* arg)
{
    auto& walk = *static_cast<Walk*>(arg);
    int before_instruction = 0;
    std::uintptr_t ip = _Unwind_GetIPInfo(context, &before_instruction);
    if (ip == 0) return _URC_END_OF_STACK;  // the end of the rank's call chain
    // The return address may already be the next call site's.
    if (before_instruction == 0) --ip;
    const auto* lsda = static_cast<const unsigned char*>(_Unwind_GetLanguageSpecificData(context));
    if (lsda == nullptr) return _URC_NO_REASON;
    const Verdict verdict = frame_verdict(lsda, _Unwind_GetRegionStart(context), ip, *walk.thrown, walk.object);
    if (verdict == Verdict::go_on) return _URC_NO_REASON;
    walk.verdict = verdict;
    return _URC_END_OF_STACK;
}

}  // namespace

bool throw_would_be_caught(const std::type_info& thrown, void* object)
{
    Walk walk{&thrown, object};
    _Unwind_Backtrace(&visit, &walk);
    return walk.verdict == Verdict::caught;
}

}  // namespace pto::mp::detail
