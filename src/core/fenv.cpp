// fegetround/fesetround for the static C++ runtime (DFTRACER_STATIC_LIBSTDCXX), hidden. The
// floating-point std::to_chars of libstdc++.a (json_text.h write_double) references them; taken
// from libm they made every traced process map and relocate libm.so.6 (docs/performance.md,
// "Process start"). x86-64 only (the x87 control word and MXCSR, as glibc does); elsewhere libm
// provides them as before.
#if defined(__x86_64__) && defined(DFTRACER_OWN_FENV)
// <fenv.h> is not included: its declarations would make these definitions visible (exported).
// GCC knows both as builtins and ignores a visibility attribute on them; the assembler directive
// hides them (not exported: the application's and libm's fegetround are untouched).
__asm__(".hidden fegetround\n\t.hidden fesetround");

namespace {
constexpr unsigned kRoundMask = 0xc00;  // FE_TONEAREST 0, FE_DOWNWARD 0x400, FE_UPWARD 0x800, FE_TOWARDZERO 0xc00
}

extern "C" int fegetround() noexcept {
  unsigned short cw;
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  return cw & kRoundMask;
}

extern "C" int fesetround(int round) noexcept {
  if ((static_cast<unsigned>(round) & ~kRoundMask) != 0) return 1;
  unsigned short cw;
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  cw = static_cast<unsigned short>((cw & ~kRoundMask) | static_cast<unsigned>(round));
  __asm__ volatile("fldcw %0" : : "m"(cw));
  unsigned int mxcsr;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  mxcsr = (mxcsr & ~(kRoundMask << 3)) | (static_cast<unsigned>(round) << 3);  // RC bits 13-14
  __asm__ volatile("ldmxcsr %0" : : "m"(mxcsr));
  return 0;
}
#endif
