/*
 * kiln.h - the whole public API of libkiln.
 *
 * Modules, from the bottom up: common (errors, log, I/O, hashing), pack
 * (packed SPIR-V), topo (CPU cache topology), pages (guest page table),
 * pool (worker pool), cache (program cache), vk (Vulkan side), prep
 * (preparation, warm start), foz (Fossilize archives: import, replay,
 * export, and the builder of their pipelines).
 */
#ifndef KILN_H
#define KILN_H

#include "kiln/common.h"
#include "kiln/pack.h"
#include "kiln/program.h"
#include "kiln/topo.h"
#include "kiln/pages.h"
#include "kiln/pool.h"
#include "kiln/cache.h"
#include "kiln/vk.h"
#include "kiln/prep.h"
#include "kiln/foz.h"
#include "kiln/service.h"

#endif /* KILN_H */
