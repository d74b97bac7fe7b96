// TT_API marks what libtensortree exports: the library is built with hidden visibility, so only
// the public classes and functions annotated with it are in its dynamic symbol table.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TT_API __attribute__((visibility("default")))
#else
#define TT_API
#endif
