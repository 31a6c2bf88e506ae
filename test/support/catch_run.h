// Runs the test cases linked into this program, as Catch's own main() would: both test mains
// call it, and Catch's implementation behind it is compiled once, in catch_impl.cpp.
#pragma once

namespace ringtrain::test {

// Catch::Session().run(argc, argv): the number of failed test cases (capped by Catch), or
// non-zero for a bad command line.
int run_catch(int argc, char** argv);

}  // namespace ringtrain::test
