// next_symbols(): dlsym(RTLD_NEXT) semantics (glibc elf/dl-lookup.c do_lookup_x/check_match,
// unversioned lookup with DL_LOOKUP_RETURN_NEWEST) over the GNU hash tables of the objects after
// the caller's in the loader's list.
#include "next_symbol.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include <cstdint>
#include <initializer_list>

namespace dftracer::preload {
namespace {

// The symbol types glibc's check_match accepts (ALLOWED_STT).
constexpr unsigned kAllowedTypes = (1u << STT_NOTYPE) | (1u << STT_OBJECT) | (1u << STT_FUNC) | (1u << STT_COMMON) |
                                   (1u << STT_TLS) | (1u << STT_GNU_IFUNC);

uint32_t gnu_hash(const char* s) {
  uint32_t h = 5381;
  for (auto c = static_cast<unsigned char>(*s); c != 0; c = static_cast<unsigned char>(*++s)) h = h * 33 + c;
  return h;
}

// One loaded object's dynamic symbol table, as the loader sees it.
struct Object {
  ElfW(Addr) base = 0;
  const ElfW(Sym) * symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Half) * versym = nullptr;  // null: no symbol versions
  const ElfW(Addr) * bloom = nullptr;
  const uint32_t* buckets = nullptr;
  const uint32_t* chain = nullptr;  // indexed by symbol index - symoffset
  uint32_t nbuckets = 0, symoffset = 0, bloom_size = 0, bloom_shift = 0;

  // False if the object has no GNU hash table (then nothing here can decide).
  bool load(const struct link_map* m) { return load(m->l_addr, m->l_ld); }
  bool load(ElfW(Addr) load_base, const ElfW(Dyn) * ld) {
    base = load_base;
    // The loader adds l_addr to these entries in a writable .dynamic, not in a read-only one
    // (e.g. the vDSO's); an unadjusted value is an offset below the load address.
    auto ptr = [&](ElfW(Addr) v) { return base != 0 && v < base ? v + base : v; };
    const uint32_t* gnu = nullptr;
    for (const ElfW(Dyn)* d = ld; d != nullptr && d->d_tag != DT_NULL; ++d) {
      switch (d->d_tag) {
        case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(ptr(d->d_un.d_ptr)); break;
        case DT_STRTAB: strtab = reinterpret_cast<const char*>(ptr(d->d_un.d_ptr)); break;
        case DT_VERSYM: versym = reinterpret_cast<const ElfW(Half)*>(ptr(d->d_un.d_ptr)); break;
        case DT_GNU_HASH: gnu = reinterpret_cast<const uint32_t*>(ptr(d->d_un.d_ptr)); break;
        default: break;
      }
    }
    if (gnu == nullptr || symtab == nullptr || strtab == nullptr) return false;
    nbuckets = gnu[0];
    symoffset = gnu[1];
    bloom_size = gnu[2];
    bloom_shift = gnu[3];
    bloom = reinterpret_cast<const ElfW(Addr)*>(gnu + 4);
    buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
    chain = buckets + nbuckets;
    return nbuckets != 0 && bloom_size != 0;
  }

  // The definition dlsym would take from this object, or null. *unsure: found, but of a kind
  // only dlsym handles (IFUNC: its resolver must run; TLS; STB_GNU_UNIQUE).
  const ElfW(Sym) * find(const char* name, uint32_t h, bool* unsure) const {
    constexpr unsigned kBits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(h / kBits) & (bloom_size - 1)];
    ElfW(Addr) mask = (ElfW(Addr)(1) << (h % kBits)) | (ElfW(Addr)(1) << ((h >> bloom_shift) % kBits));
    if ((word & mask) != mask) return nullptr;
    uint32_t i = buckets[h % nbuckets];
    if (i == 0) return nullptr;
    const ElfW(Sym)* versioned = nullptr;
    int versions = 0;
    const ElfW(Sym)* found = nullptr;
    for (;; ++i) {
      uint32_t ch = chain[i - symoffset];
      if (((ch ^ h) >> 1) == 0) {
        const ElfW(Sym)* s = &symtab[i];
        unsigned type = ELF64_ST_TYPE(s->st_info);
        bool ok = !(s->st_value == 0 && s->st_shndx != SHN_ABS && type != STT_TLS) && ((kAllowedTypes >> type) & 1u) &&
                  strcmp(strtab + s->st_name, name) == 0;
        if (ok) {
          if (versym != nullptr && (versym[i] & 0x7fff) >= 2) {
            // A versioned definition: only a default (non-hidden) one counts.
            if ((versym[i] & 0x8000) == 0 && versions++ == 0) versioned = s;
          } else {
            found = s;  // unversioned: taken at once
            break;
          }
        }
      }
      if (ch & 1u) break;
    }
    if (found == nullptr) found = versions == 1 ? versioned : nullptr;
    if (found == nullptr) return nullptr;
    unsigned bind = ELF64_ST_BIND(found->st_info), type = ELF64_ST_TYPE(found->st_info);
    if (bind != STB_GLOBAL && bind != STB_WEAK) {
      if (bind == STB_GNU_UNIQUE) *unsure = true;
      return nullptr;  // a local one is skipped, as the loader does
    }
    if (type == STT_GNU_IFUNC || type == STT_TLS) *unsure = true;
    return found;
  }
};

const struct link_map* map_of(const void* addr) {
#ifdef DLFO_STRUCT_HAS_EH_DBASE
  struct dl_find_object fo;
  if (_dl_find_object(const_cast<void*>(addr), &fo) == 0) return fo.dlfo_link_map;
  return nullptr;
#else
  Dl_info info;
  struct link_map* m = nullptr;
  if (dladdr1(addr, &info, reinterpret_cast<void**>(&m), RTLD_DL_LINKMAP) == 0) return nullptr;
  return m;
#endif
}

// dl_iterate_phdr callback of loaded_symbol: the first object other than the caller's that
// defines the name.
struct LoadedSearch {
  const void* self;
  const char* name;
  uint32_t hash;
  void* found = nullptr;  // the definition's address
  char path[4096] = {};   // or, when only dlsym can decide it, the object's path
};

int search_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<LoadedSearch*>(data);
  const ElfW(Dyn)* ld = nullptr;
  auto self = reinterpret_cast<ElfW(Addr)>(q->self);
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    ElfW(Addr) start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && self >= start && self - start < ph.p_memsz) return 0;  // ourselves
    if (ph.p_type == PT_DYNAMIC) ld = reinterpret_cast<const ElfW(Dyn)*>(start);
  }
  Object obj;
  if (ld == nullptr || !obj.load(info->dlpi_addr, ld)) return 0;
  bool unsure = false;
  const ElfW(Sym)* s = obj.find(q->name, q->hash, &unsure);
  if (s != nullptr && s->st_shndx == SHN_UNDEF) return 0;  // a reference (PLT address), not a definition
  if (s == nullptr && !unsure) return 0;
  if (s != nullptr && !unsure) {
    q->found = reinterpret_cast<void*>(obj.base + s->st_value);
    return 1;
  }
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  size_t n = strlen(info->dlpi_name);
  if (n >= sizeof q->path) return 0;
  memcpy(q->path, info->dlpi_name, n + 1);
  return 1;
}

}  // namespace

void* loaded_symbol(const void* self, const char* name) noexcept {
  LoadedSearch q{self, name, gnu_hash(name)};
  if (dl_iterate_phdr(search_object, &q) == 0) return nullptr;
  if (q.found != nullptr) return q.found;
  // An IFUNC, TLS or unique definition: dlsym in that object (already loaded: RTLD_NOLOAD) runs
  // the resolver; the handle only pins it for the lookup.
  void* h = dlopen(q.path, RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  void* p = dlsym(h, name);
  dlclose(h);
  return p;
}

size_t next_symbols(const void* self, const char* const* names, void** out, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  // Auditors see dlsym's bindings; LD_DYNAMIC_WEAK makes the loader pass over weak definitions.
  for (const char* var : {"LD_AUDIT", "LD_DYNAMIC_WEAK"}) {
    const char* v = getenv(var);
    if (v != nullptr && *v != '\0') return 0;
  }
  const struct link_map* self_map = map_of(self);
  if (self_map == nullptr) return 0;
  constexpr size_t kMaxNames = 256;
  if (n > kMaxNames) n = kMaxNames;
  uint32_t hash[kMaxNames];
  bool open[kMaxNames];  // still to be found
  for (size_t i = 0; i < n; ++i) hash[i] = gnu_hash(names[i]), open[i] = true;
  size_t left = n, resolved = 0;
  for (const struct link_map* m = self_map->l_next; m != nullptr && left > 0; m = m->l_next) {
    // The vDSO is in the list but not in the global scope dlsym searches.
    if (m->l_name != nullptr && strncmp(m->l_name, "linux-vdso", 10) == 0) continue;
    Object obj;
    if (!obj.load(m)) return resolved;  // cannot tell what it defines: dlsym decides the rest
    for (size_t i = 0; i < n; ++i) {
      if (!open[i]) continue;
      bool unsure = false;
      const ElfW(Sym)* s = obj.find(names[i], hash[i], &unsure);
      if (s == nullptr && !unsure) continue;
      open[i] = false;  // the first object with a definition decides
      --left;
      if (unsure) continue;  // out[i] stays null: dlsym
      out[i] = reinterpret_cast<void*>(obj.base + s->st_value);
      ++resolved;
    }
  }
  return resolved;
}

}  // namespace dftracer::preload
