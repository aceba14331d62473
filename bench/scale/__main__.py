from bench.scale.run import main

raise SystemExit(main())
