/* The command line of `reconclient simulate`. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling.h"
#include "simulate.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: reconclient simulate --trajectory radial|golden|tiny-golden|spiral|cartesian|epi\n"
          "                            --matrix N [--3d] --coils C [--noise S]\n"
          "                            [--spokes K [--samples M] [--frames F [--moving]] |\n"
          "                             --interleaves K] [--multiband M [--caipi S]] [--seed S]\n"
          "                            -o DATA.h5\n"
          "       reconclient simulate --trajectory cartesian --sampling vd|poisson --matrix N\n"
          "                            [--3d [--partitions NZ]] --coils C [--acceleration R]\n"
          "                            [--calibration N] [--frames F [--moving]] [--noise S]\n"
          "                            [--seed S] -o DATA.h5\n"
          "       reconclient simulate --trajectory epi --matrix N --coils C [--shots K] [--ramp]\n"
          "                            [--ghost PHI0,PHI1] [--inplane-accel R]\n"
          "                            [--header-trajectory epi|cartesian] [--noise S]\n"
          "                            [--slices Z] [--multiband M [--caipi S] [--leak-probe Z]]\n"
          "                            [--volumes V] -o DATA.h5\n"
          "writes an ISMRMRD dataset of an analytic multi-coil Shepp-Logan phantom (k-space\n"
          "from the ellipses' Fourier transforms, exact at every sample), with its trajectory,\n"
          "a header describing it, and the ground truth as the array 'phantom'\n"
          "  --spokes K       radial, golden and tiny-golden readouts (default: the Nyquist\n"
          "                   count); with --frames, the spokes of each frame\n"
          "  --samples M      samples per spoke (default 2N)\n"
          "  --frames F       a real-time stream (2D): F frames of K spokes, the angles running\n"
          "                   on from frame to frame, frame f in repetition f (configs\n"
          "                   realtime, realtime_cg)\n"
          "  --moving         the object moves from frame to frame (ground truth per frame)\n"
          "  --interleaves K  spiral arms (default N/8)\n"
          "  --multiband M    (cartesian 2D, epi) simultaneous multi-slice: M slices excited\n"
          "                   together, after a single-band reference scan of each (configs\n"
          "                   sms, epi_sms)\n"
          "  --caipi S        with --multiband: blipped-CAIPI shift, slice m moved by m/S of\n"
          "                   the field of view along the phase encode (default: none)\n"
          "  --noise S        Gaussian noise of standard deviation S on each sample's real and\n"
          "                   imaginary parts (default 0)\n"
          "undersampled Cartesian scans (--trajectory cartesian; the array 'reference' holds\n"
          "the noiseless fully sampled image):\n"
          "  --sampling vd|poisson  vd: variable-density random phase-encode lines (2D);\n"
          "                   poisson: a variable-density Poisson disc of ky-kz points (--3d)\n"
          "  --acceleration R overall acceleration, grid points over acquired ones (default 4)\n"
          "  --calibration N  fully sampled centre: N lines (2D), N x N points (3D; default 24)\n"
          "  --partitions NZ  3D: kz points (default N; the same field of view)\n"
          "  --frames F       (2D) a dynamic series: F repetitions, each its own mask; with\n"
          "                   --moving the object moves (references per frame; config cs with\n"
          "                   temporal_lambda)\n"
          "  --seed S         of the noise and of the pattern (default 1)\n"
          "  --shots K        epi: K interleaved segments, each with its three navigators\n"
          "  --ramp           epi: samples on the readout gradient's ramps too (the header's\n"
          "                   trajectoryDescription, ConventionalEPI)\n"
          "  --ghost P0,P1    epi: odd/even error of the reversed readouts, P0 rad constant and\n"
          "                   P1 rad across the readout's field of view (default 0,0)\n"
          "  --inplane-accel R  epi: every R-th line, and a reference scan of 24 lines\n"
          "  --header-trajectory cartesian  epi: the header says cartesian, as Siemens\n"
          "                   conversions write EPI (the trajectoryDescription and flags say EPI)\n"
          "  --slices Z       epi: Z slices, each its own object; with --multiband M, a\n"
          "                   multiple of M (default M): Z / M groups of M slices\n"
          "  --volumes V      epi: the slices (groups) acquired V times, volume v in\n"
          "                   repetition v, the reference scans once before: an fMRI series\n"
          "  --leak-probe Z   epi, multiband: only slice Z (1 ..) in the collapsed data, to\n"
          "                   measure slice leakage\n");
}

static int parse_int(const char *flag, const char *text, int *out) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0 || v > 1000000) {
    fprintf(stderr, "reconclient: %s must be a non-negative integer, got '%s'\n", flag, text);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int mr_simulate_command(int argc, char **argv) {
  mr_sim_options o = {.trajectory = (mr_sim_trajectory)-1, .seed = 1, .acceleration = 4,
                      .calibration = 24};
  int sampled_option = 0; /* --acceleration, --calibration or --partitions given */
  enum { OPT_3D = 256, OPT_NOISE, OPT_SPOKES, OPT_INTERLEAVES, OPT_SEED, OPT_SAMPLES,
         OPT_FRAMES, OPT_MOVING, OPT_SAMPLING, OPT_ACCELERATION, OPT_CALIBRATION,
         OPT_PARTITIONS,
         OPT_SHOTS, OPT_RAMP, OPT_GHOST, OPT_INPLANE, OPT_CLAIM, OPT_SLICES,
         OPT_MULTIBAND, OPT_CAIPI, OPT_PROBE, OPT_VOLUMES };
  static const struct option longopts[] = {
      {"trajectory", required_argument, NULL, 'T'}, {"matrix", required_argument, NULL, 'm'},
      {"3d", no_argument, NULL, OPT_3D},             {"coils", required_argument, NULL, 'c'},
      {"noise", required_argument, NULL, OPT_NOISE}, {"spokes", required_argument, NULL, OPT_SPOKES},
      {"interleaves", required_argument, NULL, OPT_INTERLEAVES},
      {"seed", required_argument, NULL, OPT_SEED},   {"out", required_argument, NULL, 'o'},
      {"samples", required_argument, NULL, OPT_SAMPLES},
      {"frames", required_argument, NULL, OPT_FRAMES}, {"moving", no_argument, NULL, OPT_MOVING},
      {"sampling", required_argument, NULL, OPT_SAMPLING},
      {"acceleration", required_argument, NULL, OPT_ACCELERATION},
      {"calibration", required_argument, NULL, OPT_CALIBRATION},
      {"partitions", required_argument, NULL, OPT_PARTITIONS},
      {"shots", required_argument, NULL, OPT_SHOTS}, {"ramp", no_argument, NULL, OPT_RAMP},
      {"ghost", required_argument, NULL, OPT_GHOST},
      {"inplane-accel", required_argument, NULL, OPT_INPLANE},
      {"header-trajectory", required_argument, NULL, OPT_CLAIM},
      {"slices", required_argument, NULL, OPT_SLICES},
      {"multiband", required_argument, NULL, OPT_MULTIBAND},
      {"caipi", required_argument, NULL, OPT_CAIPI},
      {"leak-probe", required_argument, NULL, OPT_PROBE},
      {"volumes", required_argument, NULL, OPT_VOLUMES},
      {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0},
  };
  int ch, seed = 1;
  optind = 1;
  while ((ch = getopt_long(argc, argv, "T:m:c:o:h", longopts, NULL)) != -1) {
    char *end;
    switch (ch) {
    case 'T':
      if ((int)(o.trajectory = mr_sim_trajectory_parse(optarg)) < 0) {
        fprintf(stderr, "reconclient: --trajectory is radial, golden, tiny-golden, spiral, "
                        "cartesian or epi, not '%s'\n", optarg);
        return 2;
      }
      break;
    case 'm':
      if (parse_int("--matrix", optarg, &o.matrix) < 0)
        return 2;
      break;
    case OPT_3D:
      o.three_d = 1;
      break;
    case 'c':
      if (parse_int("--coils", optarg, &o.coils) < 0)
        return 2;
      break;
    case OPT_NOISE:
      o.noise = strtod(optarg, &end);
      if (*optarg == '\0' || *end != '\0' || !(o.noise >= 0)) {
        fprintf(stderr, "reconclient: --noise must be a number >= 0, got '%s'\n", optarg);
        return 2;
      }
      break;
    case OPT_SPOKES:
      if (parse_int("--spokes", optarg, &o.spokes) < 0)
        return 2;
      break;
    case OPT_INTERLEAVES:
      if (parse_int("--interleaves", optarg, &o.interleaves) < 0)
        return 2;
      break;
    case OPT_SAMPLES:
      if (parse_int("--samples", optarg, &o.samples) < 0)
        return 2;
      break;
    case OPT_FRAMES:
      if (parse_int("--frames", optarg, &o.frames) < 0)
        return 2;
      break;
    case OPT_MOVING:
      o.moving = 1;
      break;
    case OPT_SAMPLING:
      if ((o.sampling = mr_sampling_parse(optarg)) < 0) {
        fprintf(stderr, "reconclient: --sampling is vd or poisson, not '%s'\n", optarg);
        return 2;
      }
      break;
    case OPT_ACCELERATION:
      o.acceleration = strtod(optarg, &end);
      sampled_option = 1;
      if (*optarg == '\0' || *end != '\0' || !(o.acceleration >= 1)) {
        fprintf(stderr, "reconclient: --acceleration must be a number >= 1, got '%s'\n", optarg);
        return 2;
      }
      break;
    case OPT_CALIBRATION:
      sampled_option = 1;
      if (parse_int("--calibration", optarg, &o.calibration) < 0)
        return 2;
      break;
    case OPT_PARTITIONS:
      sampled_option = 1;
      if (parse_int("--partitions", optarg, &o.partitions) < 0)
        return 2;
      break;
    case OPT_SHOTS:
      if (parse_int("--shots", optarg, &o.epi.shots) < 0)
        return 2;
      break;
    case OPT_RAMP:
      o.epi.ramp = 1;
      break;
    case OPT_GHOST: {
      char *comma;
      o.epi.ghost[0] = strtod(optarg, &comma);
      if (comma == optarg || *comma != ',' ||
          (o.epi.ghost[1] = strtod(comma + 1, &end), end == comma + 1 || *end != '\0') ||
          !isfinite(o.epi.ghost[0]) || !isfinite(o.epi.ghost[1])) {
        fprintf(stderr, "reconclient: --ghost is two numbers PHI0,PHI1 (radians), got '%s'\n",
                optarg);
        return 2;
      }
      break;
    }
    case OPT_INPLANE:
      if (parse_int("--inplane-accel", optarg, &o.epi.accel) < 0)
        return 2;
      break;
    case OPT_SLICES:
      if (parse_int("--slices", optarg, &o.epi.slices) < 0)
        return 2;
      break;
    case OPT_MULTIBAND:
      if (parse_int("--multiband", optarg, &o.multiband) < 0)
        return 2;
      break;
    case OPT_CAIPI:
      if (parse_int("--caipi", optarg, &o.caipi) < 0)
        return 2;
      break;
    case OPT_PROBE:
      if (parse_int("--leak-probe", optarg, &o.epi.leak_probe) < 0)
        return 2;
      break;
    case OPT_VOLUMES:
      if (parse_int("--volumes", optarg, &o.epi.volumes) < 0)
        return 2;
      break;
    case OPT_CLAIM:
      if (strcmp(optarg, "epi") != 0 && strcmp(optarg, "cartesian") != 0) {
        fprintf(stderr, "reconclient: --header-trajectory is epi or cartesian, not '%s'\n",
                optarg);
        return 2;
      }
      o.epi.claim_cartesian = strcmp(optarg, "cartesian") == 0;
      break;
    case OPT_SEED:
      if (parse_int("--seed", optarg, &seed) < 0)
        return 2;
      o.seed = (unsigned)seed;
      break;
    case 'o':
      o.path = optarg;
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind != argc || (int)o.trajectory < 0 || o.matrix == 0 || o.coils == 0 || o.path == NULL) {
    fprintf(stderr, "reconclient: simulate needs --trajectory, --matrix, --coils and -o, and "
                    "no other arguments\n");
    usage(stderr);
    return 2;
  }
  if ((o.spokes > 0 && (o.trajectory == MR_SIM_SPIRAL || o.trajectory == MR_SIM_CARTESIAN)) ||
      (o.interleaves > 0 && o.trajectory != MR_SIM_SPIRAL)) {
    fprintf(stderr, "reconclient: --spokes is for radial, golden and tiny-golden, --interleaves "
                    "for spiral\n");
    return 2;
  }
  if (sampled_option && o.sampling == MR_SAMPLING_FULL) {
    fprintf(stderr, "reconclient: --acceleration, --calibration and --partitions go with "
                    "--sampling\n");
    return 2;
  }
  mr_err err = {0};
  int rc = mr_simulate(&o, &err);
  if (rc < 0) {
    fprintf(stderr, "reconclient: %s\n", mr_err_text(&err, rc));
    return 1;
  }
  static const char *const names[] = {"radial", "golden-angle radial", "spiral", "Cartesian",
                                      "tiny-golden-angle radial", "EPI"};
  printf("%s: %s %s phantom, %d^%d pixels, %d coil%s", o.path, names[o.trajectory],
         o.three_d ? "3D" : "2D", o.matrix, o.three_d ? 3 : 2, o.coils, o.coils == 1 ? "" : "s");
  if (o.partitions > 0)
    printf(", %d partitions", o.partitions);
  if (o.multiband > 0)
    printf(", multiband %d, CAIPI FOV/%d", o.multiband, o.caipi > 0 ? o.caipi : 1);
  if (o.frames > 0 && o.sampling != MR_SAMPLING_FULL)
    printf(", %d%s frames", o.frames, o.moving ? " moving" : "");
  else if (o.frames > 0)
    printf(", %d%s frames of %d spokes", o.frames, o.moving ? " moving" : "", o.spokes);
  if (o.sampling != MR_SAMPLING_FULL)
    printf(", %s R %g", o.sampling == MR_SAMPLING_VD ? "variable-density lines" : "Poisson disc",
           o.acceleration);
  if (o.trajectory == MR_SIM_EPI)
    printf(", %d shot%s%s, odd/even error %g rad + %g rad across the readout", o.epi.shots > 1 ? o.epi.shots : 1,
           o.epi.shots > 1 ? "s" : "", o.epi.ramp ? ", ramp-sampled" : "", o.epi.ghost[0],
           o.epi.ghost[1]);
  if (o.trajectory == MR_SIM_EPI && o.epi.slices > 1)
    printf(", %d slices", o.epi.slices);
  if (o.trajectory == MR_SIM_EPI && o.epi.volumes > 1)
    printf(", %d volumes", o.epi.volumes);
  printf("\n");
  return 0;
}
