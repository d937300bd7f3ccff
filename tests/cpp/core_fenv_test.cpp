// The core's own fegetround/fesetround (src/core/fenv.cpp, used instead of libm's by the static
// C++ runtime): they set and report the rounding mode of both the x87 unit and SSE, as glibc's.
#include <gtest/gtest.h>

#include <cfenv>

#if defined(__x86_64__)
#define DFTRACER_OWN_FENV 1
#include "../../src/core/fenv.cpp"

namespace {
double third(double x) {
  volatile double a = x, b = 3.0;
  return a / b;  // SSE division: rounds per MXCSR
}
long double third_x87(long double x) {
  volatile long double a = x, b = 3.0L;
  return a / b;  // x87 division: rounds per the control word
}
}  // namespace

TEST(CoreFenv, SetsAndReportsEveryMode) {
  ASSERT_EQ(fegetround(), FE_TONEAREST);
  for (int mode : {FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO, FE_TONEAREST}) {
    ASSERT_EQ(fesetround(mode), 0);
    EXPECT_EQ(fegetround(), mode);
  }
  EXPECT_NE(fesetround(0x1234), 0);  // not a rounding mode: refused, mode unchanged
  EXPECT_EQ(fegetround(), FE_TONEAREST);
}

TEST(CoreFenv, RoundingReachesSseAndX87) {
  ASSERT_EQ(fesetround(FE_DOWNWARD), 0);
  double down = third(1.0);
  long double down_x87 = third_x87(1.0L);
  ASSERT_EQ(fesetround(FE_UPWARD), 0);
  double up = third(1.0);
  long double up_x87 = third_x87(1.0L);
  ASSERT_EQ(fesetround(FE_TONEAREST), 0);
  EXPECT_LT(down, up);
  EXPECT_LT(down_x87, up_x87);
  EXPECT_EQ(third(1.0), 1.0 / 3.0);
}
#endif
