"""The parts of OpenLakeConnector (openlake_client.openlake_connector), one
concern a module: config, keys, store, meta, stats, scheduler, worker."""
