/* The simulated device of the driver tests (sim_device.c). */
#ifndef POET_SIM_DEVICE_H
#define POET_SIM_DEVICE_H

#include <stdint.h>

#include "poet_nor_log.h"

/* Resets the simulator and fills dev with the driver over it: 0 on success. */
int sim_device_setup(poet_nor_device *dev);
/* Prints the simulator's counts (erases per sector, violations) and returns the number of problems seen:
 * violations, bit violations, page wraps, changed bytes outside the log's sectors. */
uint32_t sim_device_report(void);

#endif
